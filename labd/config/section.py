"""The base of every configuration section."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from labd.validation import NOT_A_BOOLEAN, numeric


class Section(BaseModel):
    """Base of every section: unknown keys are errors, values are checked on assignment, no
    number is infinite or NaN (TOML's `inf` and `1e400` would pass every bound check), and no
    boolean is taken for a number."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean_for_a_number(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(info.field_name or "")
        if isinstance(value, bool) and field is not None and numeric(field.annotation):
            raise PydanticCustomError("number_not_boolean", NOT_A_BOOLEAN)
        return value
