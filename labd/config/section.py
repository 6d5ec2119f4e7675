"""The base of every configuration section."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    """Base of every section: unknown keys are errors, values are checked on assignment."""

    model_config = ConfigDict(extra="forbid", frozen=True)
