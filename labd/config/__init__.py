"""Configuration: TOML file plus LABD_<SECTION>__<KEY> environment overrides, validated."""

from labd.config.access import LOCAL_PRINCIPAL, AuthSettings, PolicySettings, PrincipalSettings
from labd.config.artefacts import ArtefactSettings, SuiteRetention
from labd.config.example import render_example
from labd.config.loader import (
    LoadedConfig,
    env_overrides,
    find_config_file,
    load_config,
)
from labd.config.measurement import MeasurementSettings, PerfherderSettings, ReplaySettings
from labd.config.models import (
    DaemonSettings,
    EventSettings,
    HttpSettings,
    LogSettings,
    MetricsSettings,
    MqttSettings,
    PoolSettings,
    SchedulerSettings,
    Settings,
    StoreSettings,
)
from labd.config.show import masked_dump, render_toml, secret_values

__all__ = [
    "LOCAL_PRINCIPAL",
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
    "env_overrides",
    "find_config_file",
    "load_config",
    "masked_dump",
    "render_example",
    "render_toml",
    "secret_values",
]
