"""The in-process event bus and the typed domain events that travel on it."""

from labd.events.bus import EventBus, SubscriberStats, Subscription, dispatch
from labd.events.types import (
    ConfigRejected,
    ConfigReloaded,
    DaemonStarted,
    DaemonStopping,
    Event,
)

__all__ = [
    "ConfigRejected",
    "ConfigReloaded",
    "DaemonStarted",
    "DaemonStopping",
    "Event",
    "EventBus",
    "SubscriberStats",
    "Subscription",
    "dispatch",
]
