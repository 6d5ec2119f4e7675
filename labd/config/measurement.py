"""Settings of measuring: the replay servers, the conditions a measurement is trusted under,
and the Perfherder export."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from labd.config.section import Section
from labd.visible import quoted

# Treeherder's performance-artifact schema: an extraOptions entry holds at most 100
# characters, and the entries are unique (at most 8: the device model, the network profile
# and these 6).
PERFHERDER_MAX_OPTION = 100


class ReplaySettings(Section):
    """Replay servers the runner starts for jobs that name a network archive."""

    archive_dir: str = Field(
        "",
        description=(
            "Directory job archives are read from (a job's network.archive names a file "
            "here; one that leads outside, through .. or a link, is refused). Empty: "
            "<state_dir>/archives."
        ),
    )
    ca_dir: str = Field(
        "", description="The replay CA (labd replay ca DIR) for HTTPS; empty: HTTP only."
    )
    bind: str = Field(
        "127.0.0.1",
        description="Address replay servers listen on; a lab network address for devices "
        "that reach it over the network instead of adb reverse.",
    )
    max_archive_mb: float = Field(
        256, gt=0, description="Larger archives are refused (loading costs about twice the size)."
    )


class MeasurementSettings(Section):
    """Each iteration's conditions, and values labd cannot trust (see docs/metrics.md)."""

    set_aside_flagged: bool = Field(
        True,
        description="Keep flagged iterations out of summaries, comparisons and alerts (they "
        "stay in the raw results with their reasons); false: count them, flagged.",
    )
    retry_flagged: int = Field(
        0,
        ge=0,
        le=1000,
        description="Extra iterations a job may run in place of measured ones set aside.",
    )
    flag_thermal_throttling: bool = Field(
        True,
        description="Flag an iteration during which the CPUs' thermal-throttle counters rose "
        "(host) or the thermal status was above max_thermal_status (Android).",
    )
    max_thermal_status: int = Field(
        1, ge=0, le=6, description="Android thermal status above this (1 = light) is throttling."
    )
    max_load_per_cpu: float = Field(
        0,
        ge=0,
        le=1000,
        description="Flag an iteration when the 1-minute load average before it, per CPU, was "
        "above this (other work competed for the CPUs); 0: do not judge the load.",
    )
    max_temperature_c: float = Field(
        0,
        ge=0,
        le=200,
        description="Flag an iteration when the hottest thermal zone (host) was above this, "
        "before or after it; 0: do not judge it.",
    )
    max_battery_temp_c: float = Field(
        0,
        ge=0,
        le=100,
        description="Flag an iteration when the battery (Android) was hotter than this before "
        "or after it; 0: do not judge it.",
    )


class PerfherderSettings(Section):
    """The `PERFHERDER_DATA:` export Mozilla's Treeherder ingests."""

    framework: str = Field(
        "labd",
        min_length=1,
        max_length=100,
        description="The Perfherder framework the series belong to (Treeherder must know it).",
    )
    # Treeherder's own list (its performance-artifact schema refuses any other name).
    application: Literal[
        "",
        "firefox",
        "chrome",
        "chrome-m",
        "fennec",
        "geckoview",
        "refbrow",
        "fenix",
        "focus",
        "safari",
        "safari-tp",
        "custom-car",
        "cstm-car-m",
    ] = Field("", description="Application under test (Treeherder's name); empty: none.")
    extra_options: list[str] = Field(
        default_factory=list,
        max_length=6,
        description="Options added to every suite's extraOptions (they name the series: never "
        f"anything that changes per revision); each at most {PERFHERDER_MAX_OPTION} characters.",
    )

    @field_validator("extra_options")
    @classmethod
    def _options_as_perfherder_takes_them(cls, options: list[str]) -> list[str]:
        # The export would cut a longer entry, drop a blank one and merge repeats: another
        # series than the one configured, without a word. Refused here instead.
        seen: set[str] = set()
        for number, option in enumerate(options, 1):
            entry = option.strip()
            if not entry:
                raise ValueError(f"entry {number} is blank")
            if len(entry) > PERFHERDER_MAX_OPTION:
                raise ValueError(
                    f"entry {number} ({quoted(entry)}) is {len(entry)} characters long; "
                    f"Perfherder takes at most {PERFHERDER_MAX_OPTION}"
                )
            if entry in seen:
                raise ValueError(f"entry {number} ({quoted(entry)}) repeats an earlier one")
            seen.add(entry)
        return options
