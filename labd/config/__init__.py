"""Configuration: TOML file plus LABD_<SECTION>__<KEY> environment overrides, validated."""

from labd.config.artefacts import ArtefactSettings, SuiteRetention
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
    "ArtefactSettings",
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
    "SuiteRetention",
    "find_config_file",
    "load_config",
]
