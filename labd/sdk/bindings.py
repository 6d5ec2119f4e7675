"""Bindings as data (labgrid's `bindings = {"power": "PowerProtocol"}`): a scenario names
what it needs by protocol, a driver names what it provides by protocol, and the run context
matches the two for one device. No scenario reaches into its driver, and no driver builds
scenario classes at run time to smuggle itself in."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from labd.errors import LabdError

Provider = Callable[[], object]


class PluginError(LabdError):
    """A plugin broke the SDK's contract (a bad registration, a binding nobody provides, a
    provider that returned the wrong thing). The message names the plugin."""


def protocol_name(protocol: type) -> str:
    return getattr(protocol, "__name__", repr(protocol))


def matches(provided: type, wanted: type) -> bool:
    """The provided protocol is the wanted one or extends it (DesktopInput gives KeyInput)."""
    if provided is wanted:
        return True
    try:
        return issubclass(provided, wanted)
    except TypeError:  # a protocol with data members cannot be compared by issubclass
        return False


def conforms(value: object, protocol: type) -> bool:
    """isinstance where the protocol allows the check (a class, an ABC, a runtime-checkable
    Protocol); True where it does not (a plain Protocol: mypy checked it statically)."""
    try:
        return isinstance(value, protocol)
    except TypeError:
        return True


class Resources:
    """What one driver provides for one device, by protocol. The runner builds it with
    `driver.resources(device)` and hands it to the scenario in its RunContext."""

    def __init__(self, driver: str, device_id: str, providers: Mapping[type, Provider]) -> None:
        self.driver = driver
        self.device_id = device_id
        self.providers = dict(providers)

    def get(self, protocol: type, wanted_by: str) -> object:
        """The provider's object for `protocol`; PluginError naming the driver, the device and
        who wanted it when the driver provides no such thing or gives something else."""
        for provided, make in self.providers.items():
            if matches(provided, protocol):
                value = make()
                if not conforms(value, protocol):
                    raise PluginError(
                        f"driver {self.driver!r} gave a {type(value).__name__} for "
                        f"{protocol_name(protocol)} (device {self.device_id}), which lacks "
                        f"the protocol's methods"
                    )
                return value
        offered = ", ".join(sorted(protocol_name(p) for p in self.providers)) or "nothing"
        raise PluginError(
            f"{wanted_by} needs a {protocol_name(protocol)}, which driver {self.driver!r} does "
            f"not provide (it provides: {offered})"
        )
