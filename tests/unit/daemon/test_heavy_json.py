"""Heavy answers (results, history) are strict JSON: a NaN or infinity that an older record
holds goes out as null, never as the bare NaN that JavaScript, jq and PostgreSQL reject."""

from __future__ import annotations

import json
import math

import pytest

from labd.daemon.heavy import HeavyQueries, heavy_answer


async def test_a_non_finite_value_in_a_heavy_answer_is_sent_as_null() -> None:
    async def view() -> dict[str, object]:
        return {"iterations": [{"values": {"x_ms": math.nan, "y_ms": -math.inf, "z": 5.0}}]}

    response = await heavy_answer(HeavyQueries(1, 1), "ci", view)
    assert response.body is not None
    strict = json.loads(
        bytes(response.body),  # type: ignore[arg-type]
        parse_constant=lambda name: pytest.fail(f"a bare {name} in the answer"),
    )
    assert strict == {"iterations": [{"values": {"x_ms": None, "y_ms": None, "z": 5.0}}]}
