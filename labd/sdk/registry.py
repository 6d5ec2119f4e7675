"""Registration: each plugin found in an entry-point group is checked before labd uses it.

Two plugins under one name are both refused (which one was meant cannot be guessed), except
that labd's own plugin keeps its name and the other is refused; a class
that is not what its group holds, is abstract, or whose name, options, scenarios or bindings
do not fit is refused with every problem named. A refused plugin is left out; the daemon runs
with the others.
"""

from __future__ import annotations

import traceback
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from labd.sdk.bindings import PluginError, matches, protocol_name
from labd.sdk.driver import Driver
from labd.sdk.power import PowerControl
from labd.sdk.scenario import Scenario

DRIVER_GROUP = "labd.drivers"
POWER_GROUP = "labd.power"


@dataclass
class Registry:
    """The plugins of one group that passed their checks, and why each other one did not."""

    group: str
    classes: dict[str, Any] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)


def load_plugins(group: str, entries: Iterable[EntryPoint] | None = None) -> Registry:
    """Import and check every plugin of `group` (`entries`: the group's entry points, by
    default the installed ones)."""
    check = _CHECKS[group]
    registry = Registry(group)
    by_name: defaultdict[str, dict[str, EntryPoint]] = defaultdict(dict)
    for entry in entry_points(group=group) if entries is None else entries:
        by_name[entry.name][entry.value] = entry  # one distribution seen twice is one plugin
    for name, found in by_name.items():
        own = [e for e in found.values() if _builtin(e)]
        if len(found) > 1 and len(own) == 1:
            # A package cannot take a name labd's own plugin has: the lab would lose it.
            others = ", ".join(sorted(_origin(e) for e in found.values() if e not in own))
            registry.refused[name] = (
                f"{others} is registered as {name!r}, the name of labd's own plugin, which is "
                "kept; give the other plugin its own name"
            )
            found = {own[0].value: own[0]}
        elif len(found) > 1:
            origins = ", ".join(sorted(_origin(e) for e in found.values()))
            registry.refused[name] = f"{len(found)} plugins are registered as {name!r}: {origins}"
            continue
        (entry,) = found.values()
        try:
            loaded = entry.load()
        except Exception as e:
            registry.refused[name] = f"{_origin(entry)} failed to import: {_failure(e)}"
            continue
        try:
            registry.classes[name] = check(name, loaded)
        except PluginError as e:
            registry.refused[name] = f"{_origin(entry)}: {e}"
    return registry


def _builtin(entry: EntryPoint) -> bool:
    """Whether the plugin is one labd itself installs."""
    return entry.dist is not None and entry.dist.name.lower() == "labd"


def check_driver(name: str, cls: object) -> type[Driver]:
    """`cls` if it is a usable driver registered as `name`, else PluginError naming each
    problem."""
    if not (isinstance(cls, type) and issubclass(cls, Driver)):
        raise PluginError(f"driver plugin {name!r}: {cls!r} is not a labd.sdk.Driver subclass")
    problems = _concrete(cls)
    if getattr(cls, "name", None) != name:
        problems.append(
            f"its name is {getattr(cls, 'name', None)!r} but it is registered as {name!r}"
        )
    if not isinstance(getattr(cls, "platform", None), str) or not cls.platform:
        problems.append("it has no platform (a non-empty string)")
    problems += _options(cls.Options, "Options")
    problems += _provides(cls)
    scenario_names: set[str] = set()
    for scenario in cls.scenario_types:
        problems += _scenario(cls, scenario, scenario_names)
    if problems:
        raise PluginError(f"driver plugin {name!r} ({_where(cls)}): " + "; ".join(problems))
    return cls


def check_power(name: str, cls: object) -> type[PowerControl]:
    """`cls` if it is a usable power control, else PluginError naming each problem."""
    if not (isinstance(cls, type) and issubclass(cls, PowerControl)):
        raise PluginError(f"power plugin {name!r}: {cls!r} is not a labd.sdk.PowerControl subclass")
    problems = _concrete(cls) + _options(cls.Options, "Options")
    if problems:
        raise PluginError(f"power plugin {name!r} ({_where(cls)}): " + "; ".join(problems))
    return cls


_CHECKS: dict[str, Callable[[str, object], type]] = {
    DRIVER_GROUP: check_driver,
    POWER_GROUP: check_power,
}


def _concrete(cls: type) -> list[str]:
    missing = sorted(getattr(cls, "__abstractmethods__", ()))
    return [f"it does not implement {', '.join(missing)}"] if missing else []


def _options(model: object, what: str) -> list[str]:
    if isinstance(model, type) and issubclass(model, BaseModel):
        return []
    return [f"its {what} is {model!r}, not a pydantic model"]


def _provides(cls: type[Driver]) -> list[str]:
    problems = []
    for protocol, method in cls.provides.items():
        if not isinstance(protocol, type):
            problems.append(f"provides {protocol!r}, which is not a class")
        elif not callable(getattr(cls, method, None)):
            problems.append(f"provides {protocol_name(protocol)} by {method!r}, not a method")
    return problems


def _scenario(driver: type[Driver], scenario: object, seen: set[str]) -> list[str]:
    if not (isinstance(scenario, type) and issubclass(scenario, Scenario)):
        return [f"offers {scenario!r}, which is not a labd.sdk.Scenario subclass"]
    name = getattr(scenario, "name", None)
    if not isinstance(name, str) or not name:
        return [f"offers {scenario.__qualname__}, which has no name"]
    problems = [f"scenario {name!r}: {p}" for p in _concrete(scenario)]
    if name in seen:
        problems.append(f"offers two scenarios named {name!r}")
    seen.add(name)
    problems += [f"scenario {name!r}: {p}" for p in _options(scenario.Params, "Params")]
    for attribute, protocol in scenario.bindings.items():
        if not any(matches(p, protocol) for p in driver.provides):
            problems.append(
                f"scenario {name!r} binds {attribute!r} to a {protocol_name(protocol)}, "
                "which the driver does not provide"
            )
    return problems


def _failure(error: BaseException) -> str:
    """The error and where in the plugin's code it was raised."""
    # The last frame outside Python's import machinery (`<frozen importlib._bootstrap>`,
    # importlib's own files), where a module that is not there is noticed: no line of the
    # plugin's, nor one an admin could act on.
    frames = [f for f in traceback.extract_tb(error.__traceback__) if not _importing(f.filename)]
    at = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return f"{type(error).__name__}: {error}{at}"


def _importing(filename: str) -> bool:
    """Whether a frame is labd's loader or Python's import machinery, not the plugin's."""
    return filename == __file__ or filename.startswith("<") or "importlib" in Path(filename).parts


def _where(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _origin(entry: EntryPoint) -> str:
    dist = entry.dist
    return f"{entry.value} (from {dist.name} {dist.version})" if dist else entry.value
