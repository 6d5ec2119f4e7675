"""The domain model: devices, jobs, test specs, iterations and the driver interfaces."""

from labd.model.device import AdminState, Device, DeviceSelector, DeviceState
from labd.model.driver import Driver, NoOptions, PowerControl, RunContext, Scenario
from labd.model.iteration import Iteration
from labd.model.job import TERMINAL, Job, JobState, can_move
from labd.model.runas import RunAs
from labd.model.spec import ABSpec, BuildInfo, MetricSpec, NetworkSpec, TestSpec, Variant

__all__ = [
    "TERMINAL",
    "ABSpec",
    "AdminState",
    "BuildInfo",
    "Device",
    "DeviceSelector",
    "DeviceState",
    "Driver",
    "Iteration",
    "Job",
    "JobState",
    "MetricSpec",
    "NetworkSpec",
    "NoOptions",
    "PowerControl",
    "RunAs",
    "RunContext",
    "Scenario",
    "TestSpec",
    "Variant",
    "can_move",
]
