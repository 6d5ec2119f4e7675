"""Loading driver and power plugins from their entry-point groups, with their options checked.

A plugin that fails to import, is refused at registration (labd.sdk.registry) or fails to
start is logged and left out; the daemon runs with the others, and the pool marks the devices of
a plugin that failed to start with the reason.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, TypeVar

import structlog
from pydantic import BaseModel, ValidationError

from labd.errors import ConfigError
from labd.sdk import DRIVER_GROUP, POWER_GROUP, Driver, PowerControl, Registry, load_plugins
from labd.validation import describe_errors, did_you_mean, numbers_of_the_wrong_kind

if TYPE_CHECKING:
    from labd.config import Settings

log = structlog.get_logger("labd.pool")

T = TypeVar("T")


class Plugins(dict[str, T]):
    """The plugins that started, by name (drivers) or device id (power controls); `failed`
    holds why each of the others did not, `refused` why each plugin refused at registration
    was left out."""

    def __init__(self, registry: Registry) -> None:
        super().__init__()
        self.group = registry.group
        self.refused = dict(registry.refused)
        self.failed: dict[str, str] = {}
        self.disabled: list[str] = []
        self._plugin_of: dict[str, str] = {}  # a power control's device id -> its plugin

    def start(self, key: str, plugin: str, what: str, make: Any, *args: Any) -> None:
        """Construct a plugin; a plugin's own bug is logged and recorded, never fatal."""
        self._plugin_of[key] = plugin
        try:
            self[key] = make(*args)
        except Exception as e:
            log.exception(f"{what} failed to start; continuing without it", plugin=key)
            self.failed[key] = f"{what} failed to start: {type(e).__name__}: {e}"

    def census(self) -> Counter[tuple[str, str]]:
        """How many of each plugin are in each state (running, failed, refused, disabled):
        what `labd_plugins` exports, so a plugin left out shows beyond the log."""
        states: Counter[tuple[str, str]] = Counter()
        for key in self:
            states[self._plugin_of[key], "running"] += 1
        for key in self.failed:
            states[self._plugin_of[key], "failed"] += 1
        for name in self.refused:
            states[name, "refused"] += 1
        for name in self.disabled:
            states[name, "disabled"] += 1
        return states


def _plugins(group: str) -> Registry:
    """The group's plugins that passed registration (labd.sdk.load_plugins); each refused one
    is logged with the reason."""
    registry = load_plugins(group)
    for name, why in registry.refused.items():
        log.error("plugin refused; continuing without it", group=group, plugin=name, why=why)
    return registry


def _options(model: type[BaseModel], data: dict[str, Any], key: str, source: str) -> BaseModel:
    if wrong := numbers_of_the_wrong_kind(model, data):
        raise ConfigError([f"{source}: {key}.{problem}" for problem in wrong])
    try:
        return model.model_validate(data)
    except ValidationError as e:
        problems = describe_errors(e, model, source)
        raise ConfigError(
            [p.replace(f"{source}: ", f"{source}: {key}.", 1) for p in problems]
        ) from e


def run_refusals(settings: Settings, source: str) -> list[str]:
    """What `labd run` would refuse that the configuration's schema lets through: the
    plugins' own sections and this host's policy (`labd config check` and SIGHUP ask)."""
    problems: list[str] = []
    try:
        check_plugin_options(settings.drivers, settings.pool.power, source)
    except ConfigError as e:
        problems += e.problems
    try:
        settings.policy.host_policy(source)
    except ConfigError as e:
        problems += e.problems
    return problems


def check_plugin_options(
    drivers: dict[str, dict[str, Any]], power: dict[str, dict[str, Any]], source: str
) -> None:
    """What `labd run` would refuse in the drivers' and power controls' sections, found without
    starting anything (for `labd config check`): ConfigError naming every problem."""
    driver_classes = _plugins(DRIVER_GROUP).classes
    power_classes = _plugins(POWER_GROUP).classes
    checks: list[tuple[str, type[BaseModel] | None, dict[str, Any], str]] = []
    for name, section in drivers.items():
        cls = driver_classes.get(name)
        hint = f"no such driver{did_you_mean(name, driver_classes)}"
        checks.append((f"drivers.{name}", cls.Options if cls else None, section, hint))
    for device_id, section in power.items():
        kind = str(section.get("kind"))
        power_cls = power_classes.get(kind)
        rest = {k: v for k, v in section.items() if k != "kind"}
        hint = f"kind: unknown power control {kind!r}{did_you_mean(kind, power_classes)}"
        checks.append(
            (f"pool.power.{device_id}", power_cls.Options if power_cls else None, rest, hint)
        )
    problems: list[str] = []
    for key, model, section, hint in checks:
        if model is None:
            problems.append(f"{source}: {key}: {hint}")
            continue
        try:
            _options(model, section, key, source)
        except ConfigError as e:
            problems += e.problems
    if problems:
        raise ConfigError(problems)


def load_drivers(sections: dict[str, dict[str, Any]], host: str, source: str) -> Plugins[Driver]:
    """Every installed driver whose `[drivers.<name>]` section does not set enabled = false."""
    registry = _plugins(DRIVER_GROUP)
    classes = registry.classes
    unknown = [
        f"{source}: drivers.{name}: no such driver{did_you_mean(name, classes)}"
        for name in sections
        if name not in classes and name not in registry.refused  # a refused one is logged
    ]
    if unknown:
        raise ConfigError(unknown)
    drivers: Plugins[Driver] = Plugins(registry)
    for name, cls in classes.items():
        options = _options(cls.Options, sections.get(name, {}), f"drivers.{name}", source)
        if getattr(options, "enabled", True):
            drivers.start(name, name, f"driver {name}", cls, options, host)
        else:
            drivers.disabled.append(name)
    return drivers


def load_power(sections: dict[str, dict[str, Any]], source: str) -> Plugins[PowerControl]:
    """Power controllers per device id from `[pool.power.<device>]` sections."""
    registry = _plugins(POWER_GROUP)
    classes = registry.classes
    controllers: Plugins[PowerControl] = Plugins(registry)
    problems = []
    for device_id, section in sections.items():
        key = f"pool.power.{device_id}"
        kind = section.get("kind")
        if kind not in classes:
            hint = (
                did_you_mean(str(kind), classes) or f" (installed: {', '.join(classes) or 'none'})"
            )
            problems.append(f"{source}: {key}.kind: unknown power control {kind!r}{hint}")
            continue
        rest = {k: v for k, v in section.items() if k != "kind"}
        options = _options(classes[kind].Options, rest, key, source)
        controllers.start(device_id, kind, f"power control {kind}", classes[kind], options)
    if problems:
        raise ConfigError(problems)
    return controllers
