"""Typed options and parameters from the type argument alone, and what contradicts it."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from labd.sdk import Device, Driver, NoOptions, PowerControl, Scenario


class Opts(BaseModel):
    slots: int = 1


class Other(BaseModel):
    pass


class Phones(Driver[Opts]):
    name = "phones"
    platform = "test"

    async def discover(self) -> list[Device]:
        slots = range(self.options.slots)
        return [Device(id=f"p{n}", driver="phones", platform="test") for n in slots]


class Boot(Scenario[Opts]):
    name = "boot"

    async def run_iteration(self, index: int) -> dict[str, float]:
        return {"slots": float(self.params.slots)}


class Relay(PowerControl[Opts]):
    async def on(self) -> None: ...

    async def off(self) -> None: ...


async def test_the_type_argument_is_the_model_labd_validates() -> None:
    assert (Phones.Options, Boot.Params, Relay.Options) == (Opts, Opts, Opts)
    driver = Phones(Phones.Options.model_validate({"slots": 2}), "h")
    assert [d.id for d in await driver.discover()] == ["p0", "p1"]


def test_a_subclass_keeps_its_parent_model_or_names_its_own() -> None:
    class MorePhones(Phones):
        name = "more-phones"

    class OtherPhones(Phones):  # an untyped subclass may still set the model by hand
        Options = Other

    assert MorePhones.Options is Opts and OtherPhones.Options is Other


def test_a_model_that_contradicts_the_type_argument_is_refused_at_once() -> None:
    with pytest.raises(TypeError, match=r"Lying: Options = Other contradicts Driver\[Opts\]"):

        class Lying(Driver[Opts]):
            Options = Other


def test_a_type_argument_that_is_not_a_model_is_refused() -> None:
    with pytest.raises(TypeError, match=r"Scenario\[<class 'int'>\]: the type argument must be"):

        class Counting(Scenario[int]):  # type: ignore[type-var]  # the mistake under test
            pass


def test_untyped_plugins_default_to_no_options() -> None:
    class Plain(PowerControl):  # type: ignore[type-arg]  # labd's own tests write these
        async def on(self) -> None: ...

        async def off(self) -> None: ...

    assert Plain.Options is NoOptions
