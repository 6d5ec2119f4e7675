"""Typed options for plugins without boilerplate: `class D(Driver[DOptions])` types
`self.options` as DOptions for mypy and sets `D.Options = DOptions` for the configuration
loader, from the one declaration."""

from __future__ import annotations

import typing
from typing import Any

from pydantic import BaseModel, ConfigDict


class NoOptions(BaseModel):
    """For drivers, scenarios and power controls that take no options."""

    model_config = ConfigDict(extra="forbid")


def options_class(cls: type, base: type, attribute: str) -> type[BaseModel]:
    """The pydantic model `cls` takes: the type argument given to `base` in its bases, else
    the one it inherits. A model set by hand that contradicts the type argument is a
    TypeError naming both, raised when the plugin's module is imported."""
    inherited: type[BaseModel] = getattr(cls, attribute)
    argument = _type_argument(cls, base)
    if argument is None:
        return inherited
    if attribute in cls.__dict__ and cls.__dict__[attribute] is not argument:
        raise TypeError(
            f"{cls.__qualname__}: {attribute} = {cls.__dict__[attribute].__name__} contradicts "
            f"{base.__name__}[{argument.__name__}]; give the model once, as the type argument"
        )
    return argument


def _type_argument(cls: type, base: type) -> type[BaseModel] | None:
    for declared in cls.__dict__.get("__orig_bases__", ()):  # its own, not inherited
        origin = typing.get_origin(declared)
        if isinstance(origin, type) and issubclass(origin, base):
            (argument, *_) = typing.get_args(declared) or (None,)
            if isinstance(argument, type) and issubclass(argument, BaseModel):
                return argument
            if (
                argument is not None
                and argument is not Any
                and not isinstance(argument, typing.TypeVar)
            ):
                raise TypeError(
                    f"{cls.__qualname__}: {base.__name__}[{argument!r}]: the type argument must "
                    "be a pydantic model (a BaseModel subclass)"
                )
    return None
