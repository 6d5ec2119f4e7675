"""Configuration: TOML file plus LABD_<SECTION>__<KEY> environment overrides, validated."""

from labd.config.loader import LoadedConfig, find_config_file, load_config
from labd.config.models import (
    AuthSettings,
    DaemonSettings,
    EventSettings,
    HttpSettings,
    LogSettings,
    MeasurementSettings,
    MetricsSettings,
    MqttSettings,
    PerfherderSettings,
    PolicySettings,
    PoolSettings,
    PrincipalSettings,
    ReplaySettings,
    SchedulerSettings,
    Settings,
    StoreSettings,
)

__all__ = [
    "AuthSettings",
    "DaemonSettings",
    "EventSettings",
    "HttpSettings",
    "LoadedConfig",
    "LogSettings",
    "MeasurementSettings",
    "MetricsSettings",
    "MqttSettings",
    "PerfherderSettings",
    "PolicySettings",
    "PoolSettings",
    "PrincipalSettings",
    "ReplaySettings",
    "SchedulerSettings",
    "Settings",
    "StoreSettings",
    "find_config_file",
    "load_config",
]
