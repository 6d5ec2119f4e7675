"""Registration: what labd refuses to load, and that it says which plugin and why."""

from __future__ import annotations

import re
from importlib.metadata import EntryPoint

from labd.sdk import DRIVER_GROUP, POWER_GROUP, load_plugins

HERE = "tests.unit.sdk.plugins_for_tests"


def entry(name: str, target: str, group: str = DRIVER_GROUP) -> EntryPoint:
    module = "tests.unit.sdk.broken_plugin" if target == "broken" else HERE
    return EntryPoint(name, f"{module}:{target}" if target != "broken" else module, group)


def test_every_in_tree_plugin_passes() -> None:
    drivers, power = load_plugins(DRIVER_GROUP), load_plugins(POWER_GROUP)
    assert drivers.refused == {} and power.refused == {}
    assert {"host", "x11", "android", "windows"} <= drivers.classes.keys()
    assert "serial-relay" in power.classes


def test_two_plugins_under_one_name_are_both_refused() -> None:
    registry = load_plugins(DRIVER_GROUP, [entry("good", "Good"), entry("good", "Impostor")])
    assert registry.classes == {}
    assert registry.refused["good"] == (
        f"2 plugins are registered as 'good': {HERE}:Good, {HERE}:Impostor"
    )


def test_a_package_cannot_take_the_name_of_labds_own_driver() -> None:
    """An independent tester's find: a third-party driver registered as `host` had both
    refused, and the lab lost its host device to a careless package."""
    from importlib.metadata import entry_points

    (builtin,) = entry_points(group=DRIVER_GROUP, name="host")
    registry = load_plugins(DRIVER_GROUP, [builtin, entry("host", "Impostor")])
    assert registry.classes["host"] is builtin.load()
    assert registry.refused["host"] == (
        f"{HERE}:Impostor is registered as 'host', the name of labd's own plugin, which is "
        "kept; give the other plugin its own name"
    )


def test_the_same_plugin_seen_twice_is_one() -> None:
    registry = load_plugins(DRIVER_GROUP, [entry("good", "Good"), entry("good", "Good")])
    assert list(registry.classes) == ["good"] and registry.refused == {}


def test_wrong_types_are_refused_with_the_reason() -> None:
    registry = load_plugins(
        DRIVER_GROUP,
        [
            entry("fn", "not_a_class"),
            entry("relay", "Relay"),  # a power control in the drivers' group
            entry("abstract", "Abstract"),
            entry("misnamed", "Good"),
            entry("bad-options", "BadOptions"),
            entry("unprovided", "Unprovided"),
            entry("broken", "broken"),
        ],
    )
    assert registry.classes == {}
    why = registry.refused
    assert re.fullmatch(
        f"{HERE}:not_a_class: driver plugin 'fn': <function not_a_class at 0x[0-9a-f]+> is not "
        "a labd.sdk.Driver subclass",
        why["fn"],
    )
    assert why["relay"] == (
        f"{HERE}:Relay: driver plugin 'relay': <class '{HERE}.Relay'> is not a labd.sdk.Driver "
        "subclass"
    )
    assert why["abstract"] == (
        f"{HERE}:Abstract: driver plugin 'abstract' ({HERE}:Abstract): "
        "it does not implement discover"
    )
    assert why["misnamed"].endswith("its name is 'good' but it is registered as 'misnamed'")
    assert why["bad-options"].endswith("its Options is <class 'dict'>, not a pydantic model")
    assert why["unprovided"].endswith(
        "scenario 'wants-markers' binds 'markers' to a MarkerStream, which the driver does not "
        "provide; offers two scenarios named 'wants-markers'; scenario 'wants-markers' binds "
        "'markers' to a MarkerStream, which the driver does not provide"
    )
    assert why["broken"].startswith(
        "tests.unit.sdk.broken_plugin failed to import: RuntimeError: the vendor library is "
        "missing (at "
    )
    assert why["broken"].endswith("broken_plugin.py:3)")


def test_a_plugin_module_that_is_not_there_names_no_line_of_python_s_import_machinery() -> None:
    """`ModuleNotFoundError ... (at <frozen importlib._bootstrap>:1140)`: no line to open."""
    missing = EntryPoint("gone", "labd_no_such_plugin_module:Driver", DRIVER_GROUP)
    why = load_plugins(DRIVER_GROUP, [missing]).refused["gone"]
    assert why.startswith("labd_no_such_plugin_module:Driver failed to import: ModuleNotFoundError")
    assert "<frozen" not in why and "importlib" not in why and " (at " not in why


def test_power_plugins_are_checked_as_power_controls() -> None:
    registry = load_plugins(POWER_GROUP, [entry("relay", "Relay", POWER_GROUP),
                                          entry("good", "Good", POWER_GROUP)])  # fmt: skip
    assert list(registry.classes) == ["relay"]
    assert "is not a labd.sdk.PowerControl subclass" in registry.refused["good"]
