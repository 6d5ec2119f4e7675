"""Bindings as data: a scenario gets what it declared from its driver, by protocol, and a
mismatch is an error naming the driver, the scenario and what was missing."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest

from labd.sdk import (
    Device,
    Driver,
    KeyInput,
    MarkerStream,
    NoOptions,
    PluginError,
    PointerInput,
    RunContext,
    Scenario,
    TouchInput,
)

DEVICE = Device(id="d1", driver="desk", platform="test")


class Keys:
    def __init__(self, device: Device) -> None:
        self.device = device

    def key(self, combo: str) -> None: ...

    def text(self, text: str, delay_ms: float = 0) -> None: ...

    def click(self, x: int, y: int, button: str = "left", count: int = 1) -> None: ...

    def scroll(self, direction: str, clicks: int = 1) -> None: ...


class Desk(Driver[NoOptions]):
    name = "desk"
    platform = "test"
    provides: ClassVar = {KeyInput: "keys", MarkerStream: "not_markers"}

    async def discover(self) -> list[Device]:
        return [DEVICE]

    def keys(self, device: Device) -> Keys:
        return Keys(device)

    def not_markers(self, device: Device) -> object:
        return "a string is no marker stream"


class Typing(Scenario[NoOptions]):
    name = "typing"
    bindings: ClassVar = {"keys": KeyInput}
    keys: KeyInput

    async def run_iteration(self, index: int) -> dict[str, float]:
        return {}


class Swiping(Typing):
    name = "swiping"
    bindings: ClassVar = {"touch": TouchInput}
    touch: TouchInput


class Logging(Typing):
    name = "logging"
    bindings: ClassVar = {"markers": MarkerStream}
    markers: MarkerStream


def ctx(tmp_path: Path, resources: bool = True) -> RunContext:
    given = Desk(NoOptions(), "h").resources(DEVICE) if resources else None
    return RunContext("job", 1, DEVICE, tmp_path, resources=given)


def test_a_binding_is_the_driver_s_object_for_that_device(tmp_path: Path) -> None:
    scenario = Typing(NoOptions(), ctx(tmp_path))
    assert isinstance(scenario.keys, Keys) and scenario.keys.device == DEVICE


def test_a_protocol_the_driver_does_not_provide(tmp_path: Path) -> None:
    with pytest.raises(PluginError) as caught:
        Swiping(NoOptions(), ctx(tmp_path))
    assert str(caught.value) == (
        "scenario 'swiping' (binding 'touch') needs a TouchInput, which driver 'desk' does not "
        "provide (it provides: KeyInput, MarkerStream)"
    )


def test_a_provider_that_returns_the_wrong_thing(tmp_path: Path) -> None:
    with pytest.raises(PluginError) as caught:
        Logging(NoOptions(), ctx(tmp_path))
    assert str(caught.value) == (
        "driver 'desk' gave a str for MarkerStream (device d1), which lacks the protocol's methods"
    )


def test_a_context_without_resources(tmp_path: Path) -> None:
    with pytest.raises(PluginError, match="its run context has no resources"):
        Typing(NoOptions(), ctx(tmp_path, resources=False))


def test_a_wider_protocol_serves_a_narrower_binding(tmp_path: Path) -> None:
    class Pointing(Typing):
        name = "pointing"
        bindings: ClassVar = {"pointer": PointerInput}
        pointer: PointerInput

    class FullDesk(Desk):
        from labd.sdk import DesktopInput

        provides: ClassVar = {DesktopInput: "keys"}

    resources = FullDesk(NoOptions(), "h").resources(DEVICE)
    scenario = Pointing(NoOptions(), RunContext("j", 1, DEVICE, tmp_path, resources=resources))
    assert isinstance(scenario.pointer, Keys)


def test_bindings_are_checked_when_the_class_is_made() -> None:
    with pytest.raises(TypeError, match=r"Bare.bindings\['keys'\]: declare it, `keys: KeyInput`"):

        class Bare(Scenario[NoOptions]):
            bindings: ClassVar = {"keys": KeyInput}

    with pytest.raises(TypeError, match=r"Clash.bindings\['params'\]: not a usable attribute"):

        class Clash(Scenario[NoOptions]):
            bindings: ClassVar = {"params": KeyInput}
            params: KeyInput  # type: ignore[assignment]  # the clash under test

    with pytest.raises(TypeError, match="'KeyInput' is not a class"):

        class ByName(Scenario[NoOptions]):
            bindings: ClassVar = {"keys": "KeyInput"}
            keys: KeyInput
