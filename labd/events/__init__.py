"""The in-process event bus and the typed domain events that travel on it."""

from labd.events.bus import EventBus, SubscriberStats, Subscription, dispatch
from labd.events.types import (
    ChangeFound,
    ConfigRejected,
    ConfigReloaded,
    DaemonStarted,
    DaemonStopping,
    DeviceChanged,
    DevicePowerCycled,
    Event,
    HealthCheckFailed,
    IterationDone,
    JobFinished,
    JobLeased,
    JobQueued,
    JobRejected,
    JobRequeued,
    JobStarted,
)

__all__ = [
    "ChangeFound",
    "ConfigRejected",
    "ConfigReloaded",
    "DaemonStarted",
    "DaemonStopping",
    "DeviceChanged",
    "DevicePowerCycled",
    "Event",
    "EventBus",
    "HealthCheckFailed",
    "IterationDone",
    "JobFinished",
    "JobLeased",
    "JobQueued",
    "JobRejected",
    "JobRequeued",
    "JobStarted",
    "SubscriberStats",
    "Subscription",
    "dispatch",
]
