"""Plugins for the registration tests, good and broken, as entry points would name them."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel

from labd.sdk import Device, Driver, MarkerStream, NoOptions, PowerControl, Scenario


class Good(Driver[NoOptions]):
    name = "good"
    platform = "test"

    async def discover(self) -> list[Device]:
        return []


class Impostor(Good):
    name = "someone-else"


class Abstract(Driver[NoOptions]):
    name = "abstract"
    platform = "test"


class WantsMarkers(Scenario[NoOptions]):
    name = "wants-markers"
    bindings: ClassVar = {"markers": MarkerStream}
    markers: MarkerStream

    async def run_iteration(self, index: int) -> dict[str, float]:
        return {}


class Unprovided(Good):
    name = "unprovided"
    scenario_types = (WantsMarkers, WantsMarkers)


class BadOptions(Good):
    name = "bad-options"
    Options = dict  # type: ignore[assignment]  # the mistake this file exists to show


class Relay(PowerControl[NoOptions]):
    async def on(self) -> None: ...

    async def off(self) -> None: ...


class Params(BaseModel):
    n: int = 1


def not_a_class() -> None: ...


raise_on_import = None
