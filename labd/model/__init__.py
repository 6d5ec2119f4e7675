"""The domain model: devices, jobs, test specs, iterations and the driver interfaces."""

from labd.model.device import AdminState, Device, DeviceSelector, DeviceState
from labd.model.driver import Driver, NoOptions, PowerControl, RunContext, Scenario
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
    "Driver",
    "Identifier",
    "Iteration",
    "Job",
    "JobState",
    "MetricSpec",
    "NetworkSpec",
    "NoOptions",
    "Policy",
    "PowerControl",
    "RunAs",
    "RunContext",
    "Scenario",
    "TestSpec",
    "Variant",
    "can_move",
    "check_id",
    "id_problem",
]
