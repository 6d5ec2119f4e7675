"""The base of every configuration section."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    """Base of every section: unknown keys are errors, values are checked on assignment, and
    no number is infinite or NaN (TOML's `inf` and `1e400` would pass every bound check)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
