"""One iteration's raw values and the environment they were measured in."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Iteration(BaseModel):
    """Raw values of one iteration; every summary is recomputed from these."""

    model_config = ConfigDict(extra="forbid")

    job_id: str
    attempt: int
    index: int  # 0-based over warm-up then measured iterations
    warmup: bool
    values: dict[str, float] = Field(default_factory=dict)
    error: str = ""
    started_at: datetime
    finished_at: datetime
    device_id: str
    variant: str = Field("", description="base or new in an A/B job; empty otherwise.")
    flags: list[str] = Field(
        default_factory=list,
        description="Why these values may not be trusted (bad conditions, a time-out, ...).",
    )
    set_aside: bool = Field(
        False, description="Flagged and kept out of summaries, comparisons and alerts."
    )
    fingerprint: dict[str, Any] = Field(
        default_factory=dict,
        description="Device, OS build, driver versions, stabilisation, thermal, network profile.",
    )
