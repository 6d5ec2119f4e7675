"""The scenario interface: one kind of test, its parameters checked at submit time, then
setup, iterations and teardown on one device, with what it declared it needs bound to it."""

from __future__ import annotations

import keyword
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic

from pydantic import BaseModel
from typing_extensions import TypeVar

from labd.model import Device, MetricSpec, Policy
from labd.sdk.bindings import PluginError, Resources, protocol_name
from labd.sdk.generic import NoOptions, options_class

ParamsT = TypeVar("ParamsT", bound=BaseModel, default=Any)


@dataclass
class RunContext:
    """What a scenario gets for one job on one device."""

    job_id: str
    attempt: int
    device: Device
    workdir: Path
    fingerprint: dict[str, Any] = field(default_factory=dict)
    # The job's test network when it has one: "proxy" (http://address:port the device uses),
    # "address" (host:port) and "profile".
    network: dict[str, str] = field(default_factory=dict)
    # The admin's policy: which programs and environment a job may use, and as whom.
    policy: Policy = field(default_factory=Policy)
    # Why the current iteration's values cannot be trusted: a scenario adds a reason (a
    # time-out, a poor sync), the runner flags the iteration with it; reset per iteration.
    flags: list[str] = field(default_factory=list)
    # What the current iteration left out without doubting the rest (a mark whose name cannot
    # name a metric, memory the device did not report): kept as its fingerprint's `notes`,
    # not a flag (its other values stand); reset per iteration.
    notes: list[str] = field(default_factory=list)
    # What the device's driver provides (`driver.resources(device)`): a scenario's bindings
    # are resolved here.
    resources: Resources | None = None

    def resolve(self, protocol: type, wanted_by: str) -> object:
        if self.resources is None:
            raise PluginError(
                f"{wanted_by} needs a {protocol_name(protocol)}, but its run context has no "
                "resources (build it with resources=driver.resources(device))"
            )
        return self.resources.get(protocol, wanted_by)


# Names a binding may not take: the scenario's own attributes.
RESERVED = frozenset({"params", "ctx", "name", "bindings", "Params", "default_metrics"})


class Scenario(ABC, Generic[ParamsT]):
    """One kind of test. `class Boot(Scenario[BootParams])` types `self.params` and sets
    `Boot.Params`, which submitted parameters are validated against.

    `bindings` declares what the scenario needs from its device's driver, by protocol:
    `bindings = {"markers": MarkerStream}` with the annotation `markers: MarkerStream`; each is
    bound as an attribute when the scenario is made, from `ctx.resources`.

    `run_iteration` returns raw values per metric. It raises TestFailure when the test itself
    failed and InfrastructureError when the device or driver did.
    """

    name: ClassVar[str]
    Params: ClassVar[type[BaseModel]] = NoOptions
    default_metrics: ClassVar[tuple[MetricSpec, ...]] = ()
    bindings: ClassVar[Mapping[str, type]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.Params = options_class(cls, Scenario, "Params")
        for attribute, protocol in cls.bindings.items():
            _check_binding(cls, attribute, protocol)

    def __init__(self, params: ParamsT, ctx: RunContext) -> None:
        self.params = params
        self.ctx = ctx
        for attribute, protocol in type(self).bindings.items():
            wanted_by = f"scenario {self.name!r} (binding {attribute!r})"
            setattr(self, attribute, ctx.resolve(protocol, wanted_by))

    @classmethod
    def metric_spec(cls, name: str) -> MetricSpec | None:
        """The unit and direction of a metric this scenario reports (by default from
        `default_metrics`; scenarios whose metric names vary answer for them here)."""
        return next((m for m in cls.default_metrics if m.name == name), None)

    @classmethod
    def check(cls, params: ParamsT) -> list[str]:
        """Problems knowable at submit time beyond types (e.g. a missing program)."""
        return []

    @classmethod
    def policy_problems(cls, params: ParamsT, policy: Policy) -> list[str]:
        """What the admin's policy does not allow in these parameters (checked at submit
        time; a scenario that starts programs checks them again when it starts one)."""
        return []

    async def setup(self) -> None:
        """Prepare the device; record what was applied in `self.ctx.fingerprint`."""

    @abstractmethod
    async def run_iteration(self, index: int) -> dict[str, float]: ...

    async def teardown(self) -> None:
        """Undo setup; called even when iterations failed. Close what the bindings opened."""


def _check_binding(cls: type, attribute: str, protocol: object) -> None:
    where = f"{cls.__qualname__}.bindings[{attribute!r}]"
    if not attribute.isidentifier() or keyword.iskeyword(attribute) or attribute in RESERVED:
        raise TypeError(f"{where}: not a usable attribute name")
    if not isinstance(protocol, type):
        raise TypeError(f"{where}: {protocol!r} is not a class (give the protocol itself)")
    if not any(attribute in vars(k).get("__annotations__", {}) for k in cls.__mro__):
        raise TypeError(f"{where}: declare it, `{attribute}: {protocol.__name__}`, so it is typed")
