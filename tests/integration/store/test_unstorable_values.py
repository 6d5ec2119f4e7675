"""Values no JSON reader takes (NaN, infinities), stored before the runner refused them: on
SQLite they broke every JSON path query of the test (its history read as a dead database);
PostgreSQL refuses them at the write. On both, the test's history and results read again."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError

from labd.model import DeviceSelector, Iteration, JobState, TestSpec
from labd.store import Store, history_view, lane_key, results_view

SPEC = TestSpec(suite="s", test="t", scenario="command", params={"command": ["true"]},
                iterations=4, warmup=0, device=DeviceSelector(platform="host"))  # fmt: skip
REPORTED = [math.nan, math.inf, 5.0, 7.0]


async def stored_the_old_way(store: Store) -> list[bool]:
    """A succeeded job whose iterations reported REPORTED, written straight to the store as
    labd did before; which of them the database took."""
    await store.submit_job("old", SPEC, "ci")
    lease = await store.claim_job("d1", [lane_key(SPEC.device, "command")], "h", 30)
    assert lease is not None
    await store.mark_running("old", lease.token)
    now = datetime.now(UTC)
    taken = []
    for index, value in enumerate(REPORTED):
        iteration = Iteration(job_id="old", attempt=1, index=index, warmup=False,
                              values={"x_ms": value, "rss_kib": 4.0}, started_at=now,
                              finished_at=now, device_id="d1")  # fmt: skip
        try:
            await store.add_iteration(iteration, lease.token)
        except DBAPIError:
            taken.append(False)
        else:
            taken.append(True)
    await store.finish_job("old", lease.token, JobState.SUCCEEDED)
    return taken


async def test_a_nan_stored_before_is_set_aside_with_its_reason_and_the_history_reads(
    store: Store,
) -> None:
    taken = await stored_the_old_way(store)
    if store.dialect == "postgresql":
        assert taken == [False, False, True, True]  # json refuses a bare NaN: never stored
    else:
        assert taken == [True] * 4
    async with store.engine.begin() as conn:  # a database from before the repair
        await conn.execute(sa.text("DELETE FROM schema_migrations WHERE version = 6"))
    reopened = await Store.open(store.engine.url.render_as_string(hide_password=False))
    try:
        history = await history_view(reopened, "s", "t")
        x_ms = next(s for name, s in history["series"].items() if "/x_ms/" in name)
        assert x_ms["values"] == [6.0]  # the median of 5 and 7: nothing fabricated
        job = await reopened.get_job("old")
        assert job is not None
        results = await results_view(reopened, job)
        json.dumps(results, allow_nan=False)  # strict JSON, as the API sends it
        assert results["summary"]["x_ms"]["n"] == 2
        if store.dialect != "postgresql":
            first, second = results["iterations"][:2]
            assert first["values"] == second["values"] == {"rss_kib": 4.0}
            assert first["set_aside"] and second["set_aside"]
            assert first["flags"] == [
                "metric x_ms: nan is not a finite number; left out (stored before labd refused"
                " such values)"
            ]
            assert results["set_aside"]["count"] == 2
    finally:
        await reopened.close()
