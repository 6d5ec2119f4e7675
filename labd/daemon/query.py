"""Query parameters of the HTTP API, checked: a bad one is a 400 that names it."""

from __future__ import annotations

from aiohttp import web


def int_query(request: web.Request, name: str, default: int, low: int, high: int) -> int:
    """An integer query parameter in low..high; ValueError naming it otherwise."""
    raw = request.query.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name}: not an integer: {raw[:40]!r}") from None
    if not low <= value <= high:
        raise ValueError(f"{name}: {value} is outside {low}..{high}")
    return value
