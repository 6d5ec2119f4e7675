"""The chaos campaign's short mode: 3 real labd hosts, a private PostgreSQL and Mosquitto,
every fault kind once; every invariant holds and every fault is recovered from."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.chaos.faults import KINDS
from benchmarks.chaos.run import SHORT, campaign, render
from tests.conftest import REQUIRE_SERVICES, need_program


async def test_the_short_chaos_campaign_keeps_every_invariant(tmp_path: Path) -> None:
    need_program("mosquitto")
    if not list(Path("/usr/lib/postgresql").glob("*/bin/initdb")):
        reason = "PostgreSQL's server binaries are not installed (apt-get install postgresql)"
        if REQUIRE_SERVICES:
            pytest.fail(reason)
        pytest.skip(reason)
    report = await campaign(SHORT, tmp_path)
    table = render(report)
    assert sorted(f.kind for f in report.faults) == sorted(KINDS), table
    assert report.states == {"succeeded": SHORT.jobs}, table
    assert len(report.verdicts) == 7
    status = report.verdicts[-1]
    assert status.name == "every host's status topic right at the end"
    assert all(v.violations == 0 for v in report.verdicts), table
    assert None not in report.recovery.values(), table  # every host came back to work
    assert set(report.exit_codes.values()) == {0}, table
