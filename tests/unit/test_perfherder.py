from __future__ import annotations

import pytest

from labd.results import perfherder


def test_perfherder_data_keeps_every_replicate_of_the_last_attempt() -> None:
    def it(attempt: int, index: int, warmup: bool, value: float, error: str = "") -> dict:
        return {
            "attempt": attempt,
            "index": index,
            "warmup": warmup,
            "error": error,
            "values": {"load_ms": value, "fps": 60.0},
        }

    results = {
        "job": {
            "attempts": 2,
            "device_id": "pixel-7",
            "spec": {
                "suite": "web",
                "test": "news",
                "build": {"revision": "abc"},
                "metrics": [
                    {"name": "load_ms", "unit": "ms", "higher_is_better": False},
                    {"name": "fps", "unit": "fps", "higher_is_better": True},
                ],
            },
        },
        "iterations": [
            it(1, 0, False, 999),
            it(2, 0, True, 500),
            it(2, 1, False, 100),
            it(2, 2, False, 110, error="crash"),
            it(2, 3, False, 120),
        ],
    }
    data = perfherder(results)
    (suite,) = data["suites"]
    assert data["framework"] == {"name": "labd"}
    assert suite["name"] == "web.news" and suite["extraOptions"] == ["pixel-7", "abc"]
    load = next(s for s in suite["subtests"] if s["name"] == "load_ms")
    assert load == {
        "name": "load_ms",
        "value": 110.0,
        "replicates": [100, 120],
        "unit": "ms",
        "lowerIsBetter": True,
    }
    fps = next(s for s in suite["subtests"] if s["name"] == "fps")
    assert fps["lowerIsBetter"] is False
    assert suite["value"] == pytest.approx((110.0 * 60.0) ** 0.5)
