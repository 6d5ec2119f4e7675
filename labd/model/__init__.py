"""The domain model: devices, jobs, test specs, iterations, the job policy. (The driver
interfaces are the plugin SDK's: labd.sdk.)"""

from labd.model.device import AdminState, Device, DeviceSelector, DeviceState
from labd.model.ids import Identifier, check_id, id_problem
from labd.model.iteration import Iteration
from labd.model.job import TERMINAL, Job, JobState, can_move
from labd.model.policy import Policy, RunAs
from labd.model.spec import BuildInfo, MetricSpec, NetworkSpec, TestSpec

__all__ = [
    "TERMINAL",
    "ABSpec",
    "AdminState",
    "BuildInfo",
    "Device",
    "DeviceSelector",
    "DeviceState",
    "Identifier",
    "Iteration",
    "Job",
    "JobState",
    "MetricSpec",
    "NetworkSpec",
    "Policy",
    "RunAs",
    "TestSpec",
    "Variant",
    "can_move",
    "check_id",
    "id_problem",
]
