"""Results as plain data for JSON, which has no NaN or infinity: Python's encoder writes a bare
`NaN` that strict parsers (JavaScript's, PostgreSQL's, jq) reject, so an undefined number (the
spread relative to a mean of 0, a ratio to 0) becomes null."""

from __future__ import annotations

import json
import math
from typing import Any


def finite(record: dict[str, Any]) -> dict[str, Any]:
    """`record` with every NaN or infinite float, at any depth, replaced by None."""
    return {k: _finite(v) for k, v in record.items()}


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return finite(value)
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def json_text(data: Any, **options: Any) -> str:
    """`data` as strict JSON text (json.dumps' `options`): any NaN or infinity in it, which
    labd no longer stores but an older record or an undefined statistic may hold, as null."""
    try:
        return json.dumps(data, allow_nan=False, **options)
    except ValueError:  # only when there is one: finite() copies the whole answer
        return json.dumps(_finite(data), allow_nan=False, **options)
