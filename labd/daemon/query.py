"""Query parameters of the HTTP API, checked: a bad one is a 400 that names it."""

from __future__ import annotations

import re

from aiohttp import web

# ASCII digits only, with an optional '-': int() would also take full-width digits, spaces and
# underscores. (`[0-9]` is ASCII-only; `\d` is not.)
_INTEGER = re.compile(r"-?[0-9]+")


def int_query(
    request: web.Request, name: str, default: int, low: int, high: int, *, cap: bool = False
) -> int:
    """An integer query parameter in low..high; ValueError naming it otherwise.

    With `cap`, a value above `high` (however many digits it has) is taken as `high` instead.
    """
    raw = request.query.get(name)
    if raw is None:
        return default
    if not _INTEGER.fullmatch(raw):
        raise ValueError(f"{name}: not an integer: {raw[:40]!r}")
    digits = raw.removeprefix("-").lstrip("0")
    if len(digits) > len(str(max(abs(low), abs(high)))):
        # Too long to be in range, and perhaps too long for int() to convert.
        if cap and not raw.startswith("-"):
            return high
        raise ValueError(f"{name}: {raw[:40]} is outside {low}..{high}")
    value = int(raw)
    if cap and value > high:
        return high
    if not low <= value <= high:
        raise ValueError(f"{name}: {value} is outside {low}..{high}")
    return value
