"""Turn pydantic validation errors into lines that name the source, the key and the reason;
and the one nesting limit of JSON taken in at the edge (MQTT payloads, API request bodies)."""

from __future__ import annotations

import difflib
import types
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from labd.redact import is_secret_name, redact_text
from labd.visible import quoted

# Arrays and objects inside one another that an MQTT payload or an API request body may hold
# (a spec's params.env is 4 deep). Checked right after parsing, before anything recursive
# (RFC 8785 canonicalisation of a signature, pydantic's serialiser, which gives up near 255)
# could meet the input and raise instead of refusing it.
MAX_DEPTH = 64
TOO_DEEP = f"nested more than {MAX_DEPTH} levels deep"  # what the refusals say


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether parsed JSON `value` nests arrays and objects more than `limit` deep (`{}` is 1
    deep). A loop, not recursion: it cannot raise RecursionError however deep the input."""
    stack = [(value, 1)] if isinstance(value, dict | list) else []
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        for child in node.values() if isinstance(node, dict) else node:
            if isinstance(child, dict | list):
                stack.append((child, depth + 1))
    return False


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """' (did you mean 'x'?)' for the closest choice, or '' when none is close."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


SHOWN_MAX = 80  # characters of a refused value an error quotes

# pydantic's lax mode takes `true` for 1 and "1" for 1: `raw_max_age_days = true` would mean
# one day, `ok_exit_codes = [true]` would take a failing program's exit 1 for success.
NOT_A_BOOLEAN = "expected a number, not a boolean"
NOT_A_STRING = "expected a number, not a string"


def numeric(annotation: Any) -> bool:
    """Whether a field's type is int or float, alone or in a union with None."""
    return _only_numbers(_leaves(annotation))


def _only_numbers(leaves: set[Any]) -> bool:
    return bool(leaves) and leaves <= {int, float}


def _leaves(annotation: Any) -> set[Any]:
    """The types a union (or Optional) allows, None left out, constraints (Annotated) too."""
    if get_origin(annotation) is Annotated:
        return _leaves(get_args(annotation)[0])
    if get_origin(annotation) in (Union, types.UnionType):
        return {leaf for arg in get_args(annotation) for leaf in _leaves(arg)}
    return set() if annotation is type(None) else {annotation}


def numbers_of_the_wrong_kind(model: type[BaseModel], data: Mapping[str, Any]) -> list[str]:
    """`key: problem, got value` for each boolean or string `data` gives where `model` takes
    only numbers, also inside lists, tables and nested models (`ok_exit_codes = [true]`)."""
    problems: list[str] = []
    for key, value in data.items():
        if (field := model.model_fields.get(key)) is not None:
            problems += _wrong_kind(field.annotation, value, str(key))
    return problems


def _wrong_kind(annotation: Any, value: Any, path: str) -> list[str]:
    leaves = _leaves(annotation)
    if isinstance(value, bool | str) and _only_numbers(leaves):
        problem = NOT_A_BOOLEAN if isinstance(value, bool) else NOT_A_STRING
        return [f"{path}: {problem}, got {value!r}"]
    problems: list[str] = []
    for leaf in leaves:
        origin, args = get_origin(leaf), get_args(leaf)
        if isinstance(value, list | tuple) and origin in (list, tuple, set, frozenset) and args:
            fixed = origin is tuple and args[-1] is not ...  # tuple[int, str], not tuple[int, ...]
            for i, item in enumerate(value[: len(args)] if fixed else value):
                problems += _wrong_kind(args[i] if fixed else args[0], item, f"{path}.{i}")
        elif isinstance(value, dict) and origin is dict and len(args) == 2:
            for k, item in value.items():
                problems += _wrong_kind(args[1], item, f"{path}.{k}")
        elif isinstance(value, dict) and isinstance(leaf, type) and issubclass(leaf, BaseModel):
            problems += [f"{path}.{p}" for p in numbers_of_the_wrong_kind(leaf, value)]
    return problems


# What a name pattern means, in words: the models above register theirs (labd.model.ids), and
# a value that does not match is told the rule, not a regular expression.
PATTERN_RULES: dict[str, str] = {}


def describe_errors(
    error: ValidationError,
    model: type[BaseModel],
    source: str,
    origins: Mapping[tuple[str, ...], str] | None = None,
) -> list[str]:
    """One `<source>: <key.path>: <reason>` line per problem; `origins` maps a key path to
    the source it came from when that differs (e.g. an environment variable). A problem with
    a whole table (a cross-field check) names every source of the values under it."""
    return [_describe(err, model, source, origins or {}) for err in error.errors()]


def _describe(
    err: Any, model: type[BaseModel], source: str, origins: Mapping[tuple[str, ...], str]
) -> str:
    loc = tuple(str(part) for part in err["loc"])
    key = ".".join(loc) or "(top level)"
    source = _source_of(loc, source, origins)
    if err["type"] == "extra_forbidden":
        return f"{source}: {key}: unknown key{did_you_mean(loc[-1], fields_at(model, loc[:-1]))}"
    reason = err["msg"][:1].lower() + err["msg"][1:]
    value = err.get("input")
    if err["type"] == "string_pattern_mismatch" and (
        rule := PATTERN_RULES.get(err.get("ctx", {}).get("pattern", ""))
    ):
        reason = f"not a name: {rule}"
    if isinstance(value, float) and value != value:
        reason = "not a number (NaN)"
    if isinstance(value, str | int | float | bool) and not _may_hold_secrets(loc):
        shown = quoted(redact_text(value) if isinstance(value, str) else value, SHOWN_MAX)
        if not (isinstance(value, str) and shown in reason):  # quoted in it already: once
            reason += f", got {shown}"
    return f"{source}: {key}: {reason}"


def _source_of(loc: tuple[str, ...], default: str, origins: Mapping[tuple[str, ...], str]) -> str:
    """Where the value at loc came from: the source of loc or of the table holding it (a
    table given whole, as JSON in one variable); else, for a table, the sources of the values
    under it, e.g. `labd.toml and LABD_HTTP__API_PORT` for a check across two keys."""
    for end in range(len(loc), 0, -1):
        if (found := origins.get(loc[:end])) is not None:
            return found
    under = {origins[path] for path in origins if path[: len(loc)] == loc and len(path) > len(loc)}
    if not under:
        return default
    # the file first (it is the default source), then the variables in name order
    return " and ".join(sorted(under, key=lambda name: (name != default, name)))


def _may_hold_secrets(loc: tuple[str, ...]) -> bool:
    """A value under an environment (a test's API token, given as a string by mistake), under
    `auth` (principals and their keys, e.g. given whole in LABD_AUTH__PRINCIPALS) or under a
    secret-named key is never echoed."""
    return any(part.lower() in ("env", "auth") or is_secret_name(part) for part in loc)


def fields_at(model: Any, loc: tuple[str, ...]) -> Mapping[str, Any]:
    """The field names of the sub-model at loc (empty when there is none)."""
    for part in loc:
        fields = getattr(model, "model_fields", None)
        if fields is None or part not in fields:
            return {}
        model = fields[part].annotation
    return getattr(model, "model_fields", {}) or {}
