"""The effective configuration as an operator may see it: every secret masked."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, SecretStr

from labd.config.example import toml_value
from labd.redact import MASK, is_secret_name, redact_text


def masked_dump(model: BaseModel) -> dict[str, Any]:
    """The model as plain data, with secret fields and passwords inside URLs masked."""
    return {name: _mask(name, getattr(model, name)) for name in type(model).model_fields}


def _mask(name: str, value: Any) -> Any:
    if isinstance(value, BaseModel):
        return masked_dump(value)
    if isinstance(value, SecretStr) or (
        is_secret_name(name) and value and not isinstance(value, bool)
    ):
        return MASK
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, list | tuple):
        return [_mask(name, v) for v in value]
    if isinstance(value, dict):  # principals by name, environment variables, ...
        return {key: _mask(key, v) for key, v in value.items()}
    return value


def secret_values(model: BaseModel) -> list[str]:
    """Every secret string held in the model, so logs can mask them wherever they appear."""
    found: list[str] = []
    for name in type(model).model_fields:
        found += _secrets_in(name, getattr(model, name))
    return [s for s in found if s]


def _secrets_in(name: str, value: Any, secret: bool = False) -> list[str]:
    secret = secret or is_secret_name(name)
    if isinstance(value, BaseModel):
        return secret_values(value)
    if isinstance(value, SecretStr):
        return [value.get_secret_value()]
    if isinstance(value, str):
        return [value] if secret else []
    if isinstance(value, dict):
        return [s for key, v in value.items() for s in _secrets_in(str(key), v, secret)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _secrets_in(name, v, secret)]
    return []


def render_toml(data: dict[str, Any], prefix: str = "") -> str:
    """Nested plain data as TOML tables (scalars first, then sub-tables)."""
    # TOML has no null: a key left unset (a suite's limit that falls back to the section's)
    # is left out, as it would be written.
    lines = [
        f"{k} = {toml_value(v)}"
        for k, v in data.items()
        if not isinstance(v, dict) and v is not None
    ]
    for key, value in data.items():
        if isinstance(value, dict):
            lines += ["", f"[{prefix}{key}]", render_toml(value, f"{prefix}{key}.")]
    return "\n".join(lines).strip("\n")
