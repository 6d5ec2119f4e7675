"""labd's plugin SDK: everything a driver or power plugin needs from labd, in one place.

A plugin imports this module and the capabilities' public faces (`labd.capture`,
`labd.markers`, `labd.replay`, `labd.process`), never labd's internals. docs/plugins.md
walks through a complete driver.

- `Driver[Options]`: finds devices, checks their health, offers scenarios and provides what
  they bind to (`provides = {MarkerStream: "logcat"}`); registered in `labd.drivers`.
- `Scenario[Params]`: one kind of test; declares what it needs as data
  (`bindings = {"markers": MarkerStream}`) and gets it from its `RunContext`.
- Protocols a driver provides: `KeyInput`, `PointerInput`, `DesktopInput`, `TouchInput`,
  `CaptureSource` (opening a `FrameSource`), `MarkerStream` (`LineStream` implements it over
  a blocking reader); `PowerControl[Options]` for power plugins (`labd.power`).
- Input dispatch latency: an input keeps `latencies_ms` (`TimedInput`, `timed`); scenarios
  store it per iteration with `take_latencies` and `keep_latencies` (values and artefact).
- `Controller`: a user's actions (load a URL, tap, swipe, type) over any input.
- The domain types and errors a plugin uses: `Device`, `MetricSpec`, `Policy`, `RunAs`,
  `TestFailure` (the test failed), `CannotStart` (the job's spec cannot start on this
  device: it fails at once, no retry), `InfrastructureError` (the device or driver failed:
  retried, elsewhere if it can be), `UsageError`.
"""

from labd.errors import CannotStart, InfrastructureError, LabdError, TestFailure, UsageError
from labd.model import OPTIONAL_ID_PATTERN, Device, MetricSpec, Policy, ProgramNotFound, RunAs
from labd.sdk.bindings import PluginError, Resources
from labd.sdk.capture import CaptureSource, FrameSource, Image
from labd.sdk.controller import FOCUS_WAIT_S, TYPING_DELAY_MS, Controller, ascii_url, color_page
from labd.sdk.driver import Driver
from labd.sdk.generic import NoOptions
from labd.sdk.inputs import (
    CONTROL_CHARS,
    KEY_NAMES,
    MAX_CLICKS,
    MAX_COUNT,
    MAX_DELAY_MS,
    MAX_INPUT_S,
    MAX_TEXT,
    DesktopInput,
    KeyInput,
    PointerInput,
    TouchInput,
    check_count,
    check_duration,
    check_point,
    check_text,
    check_typing,
    parse_key,
)
from labd.sdk.latency import (
    LATENCY_METRICS,
    TimedInput,
    keep_latencies,
    latency_values,
    take_latencies,
    timed,
)
from labd.sdk.markers import LineStream, MarkerStream
from labd.sdk.power import PowerControl
from labd.sdk.registry import (
    DRIVER_GROUP,
    POWER_GROUP,
    Registry,
    check_driver,
    check_power,
    load_plugins,
)
from labd.sdk.scenario import RunContext, Scenario

__all__ = [
    "CONTROL_CHARS",
    "DRIVER_GROUP",
    "FOCUS_WAIT_S",
    "KEY_NAMES",
    "LATENCY_METRICS",
    "MAX_CLICKS",
    "MAX_COUNT",
    "MAX_DELAY_MS",
    "MAX_INPUT_S",
    "MAX_TEXT",
    "OPTIONAL_ID_PATTERN",
    "POWER_GROUP",
    "TYPING_DELAY_MS",
    "CannotStart",
    "CaptureSource",
    "Controller",
    "DesktopInput",
    "Device",
    "Driver",
    "FrameSource",
    "Image",
    "InfrastructureError",
    "KeyInput",
    "LabdError",
    "LineStream",
    "MarkerStream",
    "MetricSpec",
    "NoOptions",
    "PluginError",
    "PointerInput",
    "Policy",
    "PowerControl",
    "ProgramNotFound",
    "Registry",
    "Resources",
    "RunAs",
    "RunContext",
    "Scenario",
    "TestFailure",
    "TimedInput",
    "TouchInput",
    "UsageError",
    "ascii_url",
    "check_count",
    "check_driver",
    "check_duration",
    "check_point",
    "check_power",
    "check_text",
    "check_typing",
    "color_page",
    "keep_latencies",
    "latency_values",
    "load_plugins",
    "parse_key",
    "take_latencies",
    "timed",
]
