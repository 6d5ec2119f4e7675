"""The `[artefacts]` section: how long the files of finished jobs are kept, how much disk they
may take, and the address CI fetches them from."""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import Field, field_validator

from labd.config.section import Section
from labd.model import id_problem


class SuiteRetention(Section):
    """One suite's own limits; a limit left out is the section's."""

    max_age_days: float | None = Field(
        None, ge=0, le=36500, description="Keep this suite's artefacts this long (0: forever)."
    )
    max_total_mb: float | None = Field(
        None, ge=0, description="MB this suite's artefacts on this host may take (0: no limit)."
    )


class ArtefactSettings(Section):
    """Files of jobs (videos, heat maps, progress, logs in state_dir/jobs/): kept how long."""

    max_age_days: float = Field(
        30,
        ge=0,
        le=36500,
        description="A finished job's artefacts are removed this many days after it ended "
        "(0: kept forever). A suite's own value wins.",
    )
    max_total_mb: float = Field(
        0,
        ge=0,
        description="Each suite's artefacts on this host may take this many MB; over it, its "
        "oldest jobs' go first (0: no limit per suite). A suite's own value wins.",
    )
    host_max_total_mb: float = Field(
        10240,
        ge=0,
        description="Every artefact on this host together may take this many MB; over it, the "
        "oldest jobs' go first, whatever their suite (0: no limit).",
    )
    gc_interval_s: float = Field(
        3600, ge=1, le=7 * 86400, description="How often the daemon applies these limits."
    )
    base_url: str = Field(
        "",
        description="This host's API as CI reaches it, e.g. https://lab-host-1.example:9472: "
        "the result message on MQTT then lists each artefact's URL. Empty: no URLs.",
    )
    suites: dict[str, SuiteRetention] = Field(
        default_factory=dict,
        description="Per suite limits, e.g. [artefacts.suites.browser] max_age_days = 90.",
    )

    @field_validator("suites")
    @classmethod
    def _suite_names(cls, suites: dict[str, SuiteRetention]) -> dict[str, SuiteRetention]:
        # A suite name becomes a metric label: held to the job spec's grammar, no table may
        # name a suite no job can have, nor take the labels `(other)` and `(unknown)`.
        for name in suites:
            if problem := id_problem(name, "suite name"):
                raise ValueError(problem)
        return suites

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value:
            return value
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{value!r} is not an http(s)://HOST[:PORT] URL")
        if parts.username is not None or parts.password is not None:
            # The URL goes into every result message on MQTT, which any viewer may read.
            raise ValueError(
                f"{parts.scheme}://…@{parts.hostname}: no user name or password in base_url "
                "(it is published in every result message); give CI its credentials otherwise"
            )
        if parts.query or parts.fragment:
            raise ValueError(f"{value!r}: no query or fragment, only scheme, host, port, path")
        return value.rstrip("/")

    def limits(self, suite: str) -> tuple[float, float]:
        """(max age in days, max MB) for a suite, 0 meaning none."""
        own = self.suites.get(suite)
        age = own.max_age_days if own and own.max_age_days is not None else self.max_age_days
        size = own.max_total_mb if own and own.max_total_mb is not None else self.max_total_mb
        return age, size
