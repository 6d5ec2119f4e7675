"""Turn pydantic validation errors into lines that name the source, the key and the reason."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from labd.redact import is_secret_name


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """' (did you mean 'x'?)' for the closest choice, or '' when none is close."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def describe_errors(
    error: ValidationError,
    model: type[BaseModel],
    source: str,
    origins: Mapping[tuple[str, ...], str] | None = None,
) -> list[str]:
    """One `<source>: <key.path>: <reason>` line per problem; `origins` maps a key path to
    the source it came from when that differs (e.g. an environment variable)."""
    return [_describe(err, model, source, origins or {}) for err in error.errors()]


def _describe(
    err: Any, model: type[BaseModel], source: str, origins: Mapping[tuple[str, ...], str]
) -> str:
    loc = tuple(str(part) for part in err["loc"])
    key = ".".join(loc) or "(top level)"
    source = origins.get(loc, source)
    if err["type"] == "extra_forbidden":
        return f"{source}: {key}: unknown key{did_you_mean(loc[-1], fields_at(model, loc[:-1]))}"
    reason = err["msg"][:1].lower() + err["msg"][1:]
    value = err.get("input")
    if isinstance(value, str | int | float | bool) and not _may_hold_secrets(loc, value):
        reason += f", got {value!r}"
    return f"{source}: {key}: {reason}"


def _may_hold_secrets(loc: tuple[str, ...], value: object) -> bool:
    """A value under an environment (a test's API token, given as a string by mistake), under
    a secret-named key, or a URL with a user name (and maybe a password) is never echoed."""
    if isinstance(value, str) and "://" in value and "@" in value:
        return True
    return any(part.lower() == "env" or is_secret_name(part) for part in loc)


def fields_at(model: Any, loc: tuple[str, ...]) -> Mapping[str, Any]:
    """The field names of the sub-model at loc (empty when there is none)."""
    for part in loc:
        fields = getattr(model, "model_fields", None)
        if fields is None or part not in fields:
            return {}
        model = fields[part].annotation
    return getattr(model, "model_fields", {}) or {}
