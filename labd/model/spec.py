"""What a job asks for: the test, its scenario, iterations, metrics and the devices it fits."""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticKnownError

from labd.model.device import DeviceSelector
from labd.model.ids import ID_PATTERN

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def no_control(value: str) -> str:
    """`value` if it holds no control character; else ValueError saying which and where."""
    # A NUL is refused by PostgreSQL's text and JSON and silently kept by SQLite; like a name
    # (labd.model.ids), free text stored with a job holds no control character at all.
    if (found := _CONTROL.search(value)) is not None:
        raise ValueError(f"holds the control character {found.group()!r} at {found.start()}")
    return value


PERFHERDER_MAX_UNIT = 20
"""A unit's maxLength in Treeherder's performance-artifact schema."""


STORED = {"stored": True}
"""Validation context of a spec read back from the store: what was accepted at submit stays
readable after a limit is tightened (the Perfherder export refuses such a unit itself)."""


def _perfherder_unit(value: str, info: ValidationInfo) -> str:
    if len(value) > PERFHERDER_MAX_UNIT and not (info.context or {}).get("stored"):
        raise ValueError(
            f"has {len(value)} characters; Perfherder (Treeherder's performance-artifact "
            f"schema) takes a unit of at most {PERFHERDER_MAX_UNIT}"
        )
    return value


FreeText = Annotated[str, AfterValidator(no_control)]
"""A pydantic field type: text that holds no control character (NUL, newline, escape ...)."""


class BuildInfo(BaseModel):
    """The build under test: where its numbers belong in a history."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    revision: FreeText = Field(
        "", max_length=128, description="Source revision (e.g. a commit hash)."
    )
    branch: FreeText = Field("", max_length=256, description="Branch or tree.")
    build_id: FreeText = Field("", max_length=256, description="CI build identifier.")
    product: FreeText = Field("", max_length=256, description="What was built (browser, app ...).")


METRIC_NAME = r"^[A-Za-z0-9_.:/-]+$"  # a metric's name, in a manifest or from a scenario
METRIC_NAME_MAX = 128
METRIC_NAME_RULE = f"letters, digits and _ . : / -, at most {METRIC_NAME_MAX} characters"


def is_metric_name(name: object) -> bool:
    """Whether `name` is named as a manifest's metric must be (a name with `#` or `/` at odd
    places, or of 5,000 characters, reached topics, tables and Perfherder)."""
    return (
        isinstance(name, str)
        and len(name) <= METRIC_NAME_MAX
        and re.fullmatch(METRIC_NAME, name) is not None
    )


class MetricSpec(BaseModel):
    """A metric the job reports, with its unit and which direction is better."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=METRIC_NAME_MAX, pattern=METRIC_NAME)
    unit: Annotated[str, AfterValidator(_perfherder_unit)] = Field(
        "",
        description=(
            f"At most {PERFHERDER_MAX_UNIT} characters: the unit's maxLength in Treeherder's "
            "performance-artifact schema (the Perfherder export never cuts a unit)."
        ),
        json_schema_extra={"maxLength": PERFHERDER_MAX_UNIT},
    )
    higher_is_better: bool | None = Field(
        None, description="Whether a higher value is better; unset: the scenario's (else no)."
    )


class NetworkSpec(BaseModel):
    """The test network of a job: a recorded archive served by a replay server, shaped.
    `labd replay serve` checks its shaping options with this model too."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    archive: FreeText = Field(
        min_length=1, max_length=1024, description="HAR file, relative to replay.archive_dir."
    )
    profile: str = Field(
        "none",
        max_length=32,
        description="Named profile: none, 2g, 3g-slow, 3g, 3g-fast, 4g, lte, dsl, cable, fios.",
    )
    latency_ms: float | None = Field(
        None, strict=True, ge=0, le=10_000, description="Overrides the RTT."
    )
    down_kbps: float | None = Field(
        None, strict=True, ge=0, description="Overrides downstream bandwidth."
    )
    up_kbps: float | None = Field(
        None, strict=True, ge=0, description="Overrides upstream bandwidth."
    )
    jitter_ms: float | None = Field(
        None, strict=True, ge=0, le=10_000, description="Extra delay, up to this."
    )
    loss: float | None = Field(
        None, strict=True, ge=0, lt=1, description="Share of exchanges losing a packet."
    )
    ignore_params: list[str] = Field(
        default_factory=list, description="Query parameters not matched (cache busters)."
    )

    @field_validator("latency_ms", "down_kbps", "up_kbps", "jitter_ms", "loss")
    @classmethod
    def _finite(cls, value: float | None, info: ValidationInfo) -> float | None:
        # nan and inf shape nothing (an infinite bandwidth crashed the replay server). A spec
        # read back from the store stays readable whatever it holds.
        stored = (info.context or {}).get("stored")
        if value is not None and not math.isfinite(value) and not stored:
            raise PydanticKnownError("finite_number")
        return value


class Variant(BaseModel):
    """One side of an A/B job: parameters over the job's own, and its build."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    params: dict[str, Any] = Field(
        default_factory=dict,
        description="Parameters replacing the job's own for this variant (command: command, "
        "env; page-load: browser, command, url; app-launch: package, activity, app).",
    )
    build: BuildInfo | None = Field(None, description="This variant's build; empty: the job's.")


class ABSpec(BaseModel):
    """Two variants run interleaved on one device, compared when the job ends (Talos, Larres
    et al.: drift, heat and background work then hit both alike)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base: Variant = Field(description="The baseline.")
    new: Variant = Field(description="The candidate, judged against the baseline.")
    order: Literal["alternate", "random"] = Field(
        "alternate",
        description="alternate: base, new, base, new ... in blocks; random: each pair of "
        "blocks in a random order.",
    )
    block: int = Field(
        1, strict=True, ge=1, le=1000, description="Iterations of one variant in a row."
    )
    seed: int = Field(0, strict=True, ge=0, description="Seed of the random order (repeatable).")


VARIANTS = ("base", "new")


# Measured iterations before stop_when_stable may stop: labd.stats.STABLE_AFTER, the stopping
# rule's own (labd.stats brings SciPy; a test holds the two equal).
STABLE_AFTER = 15


class TestSpec(BaseModel):
    """One test run: scenario x iterations on one device matched by the selector."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    __test__ = False  # not a pytest class

    # Both become MQTT topic levels and file names: labd's one grammar for names.
    suite: str = Field(min_length=1, max_length=128, pattern=ID_PATTERN)
    test: str = Field(min_length=1, max_length=128, pattern=ID_PATTERN)
    scenario: str = Field(min_length=1, description="Scenario name, provided by a driver.")
    params: dict[str, Any] = Field(default_factory=dict, description="The scenario's parameters.")
    iterations: int = Field(
        10,
        strict=True,
        ge=1,
        le=10_000,
        description="Measured iterations (the most, with stop_when_stable).",
    )
    stop_when_stable: bool = Field(
        False,
        description=(
            "Stop early once every metric is stable: its mean's 95% interval within 0.38 "
            "times stable_effect, so that two such jobs tell a change of stable_effect 95% "
            "of the time (after at least 15 measured iterations)."
        ),
    )
    stable_effect: float = Field(
        0.01,
        strict=True,
        gt=0,
        lt=1,
        description="The relative change the measurement must resolve.",
    )
    warmup: int = Field(
        1, strict=True, ge=0, le=1_000, description="Warm-up iterations (kept, flagged)."
    )
    metrics: list[MetricSpec] = Field(
        default_factory=list, description="Metrics to report; empty: the scenario's defaults."
    )
    device: DeviceSelector = Field(default_factory=DeviceSelector)
    priority: int = Field(0, strict=True, ge=-100, le=100, description="Higher runs first.")
    timeout_s: float = Field(
        3600,
        strict=True,
        gt=0,
        le=7 * 24 * 3600,
        description="An attempt's time-out, from its start (a retry starts afresh).",
    )
    queue_timeout_s: float | None = Field(
        None,
        strict=True,
        gt=0,
        le=30 * 24 * 3600,
        description="How long after its submission the job may still wait for a device: a job "
        "not started by then times out. Unset: the lab's scheduler.queue_timeout_s.",
    )
    max_attempts: int = Field(
        3, strict=True, ge=1, le=20, description="Tries on infrastructure failures."
    )
    build: BuildInfo = Field(default_factory=BuildInfo)
    baseline: FreeText = Field(
        "", max_length=128, description="Job id or revision to compare with."
    )
    network: NetworkSpec | None = Field(
        None, description="Serve the test's pages from an archive, shaped (a replay server)."
    )
    ab: ABSpec | None = Field(
        None,
        description="Interleaved A/B: a base and a new variant on one device; iterations and "
        "warmup count per variant, and the comparison is the job's result.",
    )

    @model_validator(mode="after")
    def _ab_alone(self) -> TestSpec:
        if self.ab is not None and self.stop_when_stable:
            raise ValueError("ab: cannot be combined with stop_when_stable")
        if self.stop_when_stable and self.iterations < STABLE_AFTER:
            raise ValueError(
                f"stop_when_stable: it stops no earlier than {STABLE_AFTER} measured "
                f"iterations, so iterations = {self.iterations} can never stop early: raise "
                "iterations (the most it may run) or leave stop_when_stable out"
            )
        if self.ab is not None and self.baseline:
            raise ValueError("ab: the base variant is the baseline; leave baseline empty")
        return self

    def planned_iterations(self) -> int:
        """Warm-up and measured iterations of every variant."""
        return (self.warmup + self.iterations) * (2 if self.ab else 1)

    def params_of(self, variant: str = "") -> dict[str, Any]:
        """The scenario parameters of one variant ("" for a job without variants)."""
        if not variant:
            return self.params
        assert self.ab is not None
        return {**self.params, **getattr(self.ab, variant).params}

    def build_of(self, variant: str = "") -> BuildInfo:
        if variant and self.ab is not None:
            return getattr(self.ab, variant).build or self.build
        return self.build

    def variants(self) -> tuple[str, ...]:
        """("base", "new") for an A/B job, else ("",)."""
        return VARIANTS if self.ab else ("",)
