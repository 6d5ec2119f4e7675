"""Nothing is lost: a broker that goes away mid-job, a daemon that is SIGKILLed, a last will."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from tests.conftest import LabdProcess, fill_to_the_last_byte
from tests.integration.mqtt.conftest import Follower, daemon_config, publish_signed, spec
from tests.integration.mqtt.test_bridge import PREFIX, assert_complete, events_of, finished


async def test_broker_away_for_10_s_mid_job_loses_no_event(
    mosquitto_factory: Any, start_labd: Any, tmp_path: Path
) -> None:
    broker = mosquitto_factory()
    daemon: LabdProcess = start_labd(
        daemon_config(tmp_path, f'url = "mqtt://127.0.0.1:{broker.port}"\nreconnect_max_s = 2')
    )
    daemon.wait_for_log("mqtt connected")
    async with Follower(broker.port) as ci:
        job = {"id": "long", "spec": spec(iterations=24, seconds=0.5)}
        await publish_signed(broker.port, f"{PREFIX}/jobs/submit", job)
        await ci.wait_for(lambda: any(e["kind"] == "running" for e in events_of(ci, "long")))
        broker.stop()
        await asyncio.sleep(2)
        status, ready = daemon.get("/readyz")
        assert status == 503 and "not connected" in ready["checks"]["broker"]
        assert "\nlabd_mqtt_connected 0.0\n" in daemon.get("/metrics")[1]  # no lag behind /readyz
        await asyncio.sleep(8)
        broker.start()
        await ci.wait_for(lambda: finished(ci, "long"), within=90)
    events = events_of(ci, "long")
    assert_complete(events)
    assert [e["kind"] for e in events].count("iteration") >= 24
    assert events[-1]["state"] == "succeeded"
    assert daemon.get("/readyz")[0] == 200
    assert "\nlabd_mqtt_connected 1.0\n" in daemon.get("/metrics")[1]
    assert daemon.stop() == 0


async def test_sigkilled_daemon_restarts_and_its_outbox_drains(
    mosquitto_factory: Any, start_labd: Any, tmp_path: Path
) -> None:
    broker = mosquitto_factory()
    config = daemon_config(tmp_path, f'url = "mqtt://127.0.0.1:{broker.port}"\nkeepalive_s = 5')
    daemon: LabdProcess = start_labd(config)
    daemon.wait_for_log("mqtt connected")
    async with Follower(broker.port) as ci:
        job = {"id": "survivor", "spec": spec(iterations=10, seconds=0.3)}
        await publish_signed(broker.port, f"{PREFIX}/jobs/submit", job)
        await ci.wait_for(lambda: len(events_of(ci, "survivor")) >= 5)
        daemon.kill()
        # The broker notices the dead connection and sends labd's last will.
        await ci.wait_for(lambda: ci.on("hosts/labd/status")[-1]["status"] == "offline", within=20)
        daemon = start_labd(config)
        await ci.wait_for(lambda: finished(ci, "survivor"), within=90)
        await ci.wait_for(lambda: ci.on("hosts/labd/status")[-1]["status"] == "online")
    events = events_of(ci, "survivor")
    assert_complete(events)
    kinds = [e["kind"] for e in sorted(events, key=lambda e: e["seq"])]
    assert "requeued" in kinds and kinds[-1] == "finished"
    assert events[-1]["state"] == "succeeded"
    assert daemon.stop() == 0


async def test_a_backlog_sets_a_jobs_retained_state_once_not_through_every_state(
    mosquitto_factory: Any, start_labd: Any, tmp_path: Path
) -> None:
    """Events waiting in the outbox (the broker away; after a crash, also those sent and not
    yet forgotten, which go out again) each published the job's retained state as well: after
    a SIGKILL the broker's "succeeded" went back to "queued" and up through every state, and a
    CI client that looked then read "queued". A backlog now sets it once, from its newest
    event; every event still goes out, in order."""
    broker = mosquitto_factory()
    config = daemon_config(tmp_path, f'url = "mqtt://127.0.0.1:{broker.port}"\nreconnect_max_s = 1')
    daemon: LabdProcess = start_labd(config)
    daemon.wait_for_log("mqtt connected")
    async with Follower(broker.port, topics=[f"{PREFIX}/jobs/backlog/#"]) as ci:
        broker.stop()
        assert daemon.post("/api/v1/jobs", {"id": "backlog", "spec": spec(iterations=3)})[0] == 201
        for _ in range(300):
            if daemon.get("/api/v1/jobs/backlog")[1].get("state") == "succeeded":
                break
            await asyncio.sleep(0.1)
        broker.start()  # the follower's session was kept: it is sent all labd publishes
        await ci.wait_for(lambda: finished(ci, "backlog"), within=30)
        await asyncio.sleep(1)  # anything published after the last event arrives too
    events = events_of(ci, "backlog")
    assert_complete(events)
    assert [e["kind"] for e in events][:3] == ["queued", "leased", "running"]
    # (The follower may get the retained state twice: again when it subscribes again.)
    assert {body["state"] for body in ci.on("jobs/backlog/state")} == {"succeeded"}
    assert daemon.stop() == 0


async def test_requests_sent_while_labd_is_away_are_handled_when_it_returns(
    mosquitto_factory: Any, start_labd: Any, tmp_path: Path
) -> None:
    """labd keeps its MQTT session: QoS 1 requests the broker took while labd was stopped,
    and while the broker itself restarted, are handled once labd is back."""
    broker = mosquitto_factory()
    config = daemon_config(tmp_path, f'url = "mqtt://127.0.0.1:{broker.port}"')
    daemon: LabdProcess = start_labd(config)
    daemon.wait_for_log("mqtt connected")
    assert daemon.stop() == 0
    async with Follower(broker.port) as ci:
        submit = f"{PREFIX}/jobs/submit"
        await publish_signed(broker.port, submit, {"id": "while-away", "spec": spec(2)})
        broker.stop()  # and the broker restarts too, from its persistence file
        broker.start()
        await publish_signed(broker.port, submit, {"id": "after-restart", "spec": spec(2)})
        daemon = start_labd(config)
        await ci.wait_for(lambda: finished(ci, "while-away") and finished(ci, "after-restart"))
    assert events_of(ci, "while-away")[-1]["state"] == "succeeded"
    assert events_of(ci, "after-restart")[-1]["state"] == "succeeded"
    assert daemon.stop() == 0


async def test_an_undeliverable_outbox_row_is_set_aside_and_the_drain_goes_on(
    mosquitto_factory: Any, start_labd: Any, tmp_path: Path
) -> None:
    """Rows a database from before the id grammar may hold (a wildcard in a job id, a body
    missing its fields) are kept aside with the reason; every row behind them goes out."""
    import sqlite3
    import time

    broker = mosquitto_factory()
    config = daemon_config(tmp_path, f'url = "mqtt://127.0.0.1:{broker.port}"')
    daemon: LabdProcess = start_labd(config)
    daemon.wait_for_log("mqtt connected")
    assert daemon.stop() == 0
    database = sqlite3.connect(tmp_path / "labd" / "labd.db")
    body = {"state": "queued", "kind": "queued", "time": time.time(), "seq": 1}
    with database:
        for key, row_body in (("pr#42", {**body, "job_id": "pr#42"}), ("a+b", {}), ("ok", {})):
            database.execute(
                "INSERT INTO outbox (host, stream, key, seq, body, created_at) "
                "VALUES ('labd', 'job', ?, 1, ?, ?)",
                (key, json.dumps(row_body), time.time()),
            )
    async with Follower(broker.port) as ci:
        daemon = start_labd(config)
        await publish_signed(broker.port, f"{PREFIX}/jobs/submit", {"id": "after", "spec": spec(1)})
        await ci.wait_for(lambda: finished(ci, "after"))
    aside = database.execute("SELECT key, error FROM outbox_set_aside ORDER BY id").fetchall()
    database.close()
    assert [key for key, _ in aside] == ["pr#42", "a+b", "ok"]
    assert "wildcard" in aside[0][1].lower() or "#" in aside[0][1]
    _, metrics = daemon.get("/metrics")
    assert 'labd_outbox_set_aside_total{stream="job"} 3.0' in metrics
    assert daemon.get("/readyz")[0] == 200
    assert daemon.stop() == 0


async def test_requests_sent_while_the_database_is_away_wait_and_are_handled(
    mosquitto_factory: Any, start_labd: Any, tmp_path: Path, postgres_url: str
) -> None:
    """With the database cut off, labd leaves the broker (its status says what is down) and
    does not hammer it; QoS 1 requests published meanwhile wait in its session and run once
    the database is back."""
    import asyncpg

    from tests.conftest import POSTGRES

    database = postgres_url.rsplit("/", 1)[1]

    async def allow(connect: bool) -> None:
        conn = await asyncpg.connect(
            host=POSTGRES[0], port=POSTGRES[1], user="postgres", database="test"
        )
        try:
            await conn.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS {connect!s}')
            if not connect:
                await conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1",
                    database,
                )
        finally:
            await conn.close()

    broker = mosquitto_factory()
    config = daemon_config(
        tmp_path,
        f'url = "mqtt://127.0.0.1:{broker.port}"',
        extra=f'[store]\nurl = "{postgres_url}"\n',
    )
    daemon: LabdProcess = start_labd(config)
    daemon.wait_for_log("mqtt connected")
    async with Follower(broker.port) as ci:
        await allow(False)
        try:
            await ci.wait_for(
                lambda: "store" in (ci.on("hosts/labd/status") or [{}])[-1].get("down", {}),
                within=30,
            )
            # The broker is fine: /readyz says why labd left it, without blaming it.
            deadline = asyncio.get_running_loop().time() + 15
            while "database" not in (broker_check := daemon.get("/readyz")[1]["checks"]["broker"]):
                assert asyncio.get_running_loop().time() < deadline, broker_check
                await asyncio.sleep(0.2)
            assert "left the broker while the database is unreachable" in broker_check
            assert "mqtt down" not in daemon.get("/readyz")[1]["checks"]["components"]
            lines = len(daemon.logs())
            for n in range(2):
                await publish_signed(
                    broker.port, f"{PREFIX}/jobs/submit", {"id": f"away-{n}", "spec": spec(1)}
                )
            await asyncio.sleep(8)
            connects = [e for e in daemon.logs()[lines:] if e.get("event") == "mqtt connected"]
            assert len(connects) <= 1, connects  # no reconnect loop while the database is away
        finally:
            await allow(True)
        await ci.wait_for(lambda: finished(ci, "away-0") and finished(ci, "away-1"), within=90)
    assert events_of(ci, "away-0")[-1]["state"] == "succeeded"
    assert daemon.stop() == 0


async def test_a_full_disk_refuses_requests_by_name_and_keeps_the_broker_session(
    mosquitto_factory: Any, start_labd: Any, tmp_path: Path, small_disk: Any
) -> None:
    """With the state directory's disk full to the last byte (a real tmpfs), events queued
    before still go out, a submission is refused saying why, and labd stays connected: it used
    to restart its MQTT session in a loop, a traceback each time, because deleting delivered
    outbox rows needs space too."""
    import sqlite3

    disk = small_disk(tmp_path / "labd", 32)  # the state directory daemon_config names
    broker = mosquitto_factory()
    config = daemon_config(tmp_path, f'url = "mqtt://127.0.0.1:{broker.port}"\nreconnect_max_s = 1')
    daemon: LabdProcess = start_labd(config)
    daemon.wait_for_log("mqtt connected")
    async with Follower(broker.port) as ci:
        # Under scheduler.min_free_mb from the start: the retained status says so (it said
        # "online", nothing down, because the news came before the bridge listened).
        await ci.wait_for(
            lambda: "storage" in (ci.on("hosts/labd/status") or [{}])[-1].get("down", {}),
            within=20,
        )
        broker.stop()
        # Queued while the broker is away (the disk is under scheduler.min_free_mb, so it
        # stays queued): its event waits in the outbox.
        assert daemon.post("/api/v1/jobs", {"id": "early", "spec": spec(1)})[0] == 201
        # SQLite reuses its write-ahead log's file: empty it, so every write needs space.
        with sqlite3.connect(disk / "labd.db") as database:
            database.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        fill_to_the_last_byte(disk / "filler")
        lines = len(daemon.logs())
        broker.start()
        await ci.wait_for(lambda: ci.on("jobs/early/state"), within=20)
        submit = f"{PREFIX}/jobs/submit"
        await publish_signed(broker.port, submit, {"id": "full", "spec": spec(1)})
        await ci.wait_for(lambda: ci.on("errors"), within=20)
        (refusal,) = ci.on("errors")
        assert refusal["reason"] == "unavailable"
        assert "labd's disk is full (its database or state directory)" in refusal["problems"][0]
        await asyncio.sleep(3)  # the delivered rows cannot be deleted meanwhile
        later = [e.get("event") for e in daemon.logs()[lines:]]
        assert "mqtt session failed; reconnecting" not in later
        assert later.count("mqtt connected") == 1, later
        (disk / "filler").unlink()
        await publish_signed(broker.port, submit, {"id": "ok", "spec": spec(1)})
        await ci.wait_for(lambda: ci.on("jobs/ok/state"), within=20)
    assert daemon.stop() == 0


async def test_a_broker_that_refuses_labds_publishes_is_named_and_loses_no_event(
    mosquitto_factory: Any, start_labd: Any, tmp_path: Path
) -> None:
    """A tester's broker let labd read but not write: every publish was acknowledged and
    dropped, labd deleted each event as delivered, and /readyz said all was well."""
    import signal
    import sqlite3

    acl = tmp_path / "acl"
    acl.write_text("topic read labd/#\n")  # anonymous clients (labd, the follower) may only read
    broker = mosquitto_factory(f"acl_file {acl}\n")
    config = daemon_config(tmp_path, f'url = "mqtt://127.0.0.1:{broker.port}"\nreconnect_max_s = 1')
    daemon: LabdProcess = start_labd(config)
    async with Follower(broker.port) as ci:
        refused = daemon.wait_for_log("mqtt connection lost; reconnecting", timeout=30)
        assert (
            "did not deliver labd's own status on labd/v1/lab1/hosts/labd/status"
            in refused["error"]
        )
        status, ready = daemon.get("/readyz")
        assert status == 503 and "check its ACL" in ready["checks"]["broker"]
        # Not ready through the next tries either (it said ready for each 10-s check).
        for _ in range(12):
            await asyncio.sleep(1)
            assert daemon.get("/readyz")[0] == 503
        assert daemon.post("/api/v1/jobs", {"id": "kept", "spec": spec(1)})[0] == 201
        await asyncio.sleep(3)
        assert not events_of(ci, "kept")
        with sqlite3.connect(tmp_path / "labd" / "labd.db") as database:
            (kept,) = database.execute("SELECT count(*) FROM outbox WHERE key = 'kept'").fetchone()
        assert kept > 0  # waiting in the outbox, not deleted as delivered

        acl.write_text("topic readwrite labd/#\n")  # the administrator mends the ACL
        assert broker.proc is not None
        broker.proc.send_signal(signal.SIGHUP)  # mosquitto reloads its ACL
        await ci.wait_for(lambda: finished(ci, "kept"), within=60)
    assert_complete(events_of(ci, "kept"))
    assert daemon.get("/readyz")[0] == 200
    assert daemon.stop() == 0
