"""Only those the lab admits get anything done over MQTT: the attacks of an anonymous or
self-declared client, on the embedded broker of a bare machine and on Mosquitto with the
password and ACL files `labd auth mosquitto` writes. Each attack's command would create a
file; the file must not exist."""

from __future__ import annotations

import asyncio
import contextlib
import json
import pwd
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiomqtt
import pytest

from labd.auth import Credentials, ensure_local_credentials
from tests.conftest import LabdProcess
from tests.integration.mqtt.conftest import (
    CI,
    OPS,
    VIEWER,
    Follower,
    daemon_config,
    free_port,
    publish,
    publish_signed,
    signed,
    spec,
)
from tests.integration.mqtt.test_bridge import PREFIX, events_of, finished


def broker_login(creds: Credentials) -> dict[str, str]:
    return {"username": creds.broker_username, "password": creds.broker_password}


def touching(marker: Path) -> dict[str, Any]:
    """A job whose command would create `marker`: what an attacker wants to run."""
    return {**spec(1), "params": {"command": ["sh", "-c", f"id > {marker}"]}}


async def attacks(port: int, marker: Path) -> None:
    """Everything a client without the right key or role tries."""
    submit = f"{PREFIX}/jobs/submit"
    unsigned = {"schema_version": 2, "id": "evil-1", "sender": "ops", "spec": touching(marker)}
    await publish(port, submit, json.dumps(unsigned).encode(), **broker_login(CI))
    # Signed, but the policy allows no shell (and a viewer may not submit at all).
    await publish_signed(
        port, submit, {"id": "evil-2", "spec": touching(marker)}, CI, **broker_login(CI)
    )
    await publish_signed(
        port, submit, {"id": "evil-3", "spec": spec(1)}, VIEWER, **broker_login(VIEWER)
    )


async def cannot_connect(port: int, **login: Any) -> bool:
    try:
        async with aiomqtt.Client("127.0.0.1", port, **login):
            return False
    except aiomqtt.MqttError:
        return True


async def test_the_embedded_broker_admits_only_the_labs_principals(
    start_labd: Any, tmp_path: Path
) -> None:
    port = free_port()
    daemon: LabdProcess = start_labd(daemon_config(tmp_path, f"embedded_port = {port}"))
    daemon.wait_for_log("embedded mqtt broker listening")
    assert daemon.wait_for_log("mqtt connected")["protocol"] == "V311"
    marker = tmp_path / "pwned"
    assert await cannot_connect(port)  # anonymous
    assert await cannot_connect(port, username="ci", password="guess")
    # A client with the client id labd once used (labd-<lab>-<host>) took its session over,
    # before the broker checked its password: labd's id is not guessable now.
    for login in ({}, broker_login(VIEWER)):
        async with contextlib.AsyncExitStack() as stack:
            with contextlib.suppress(aiomqtt.MqttError):
                await stack.enter_async_context(
                    aiomqtt.Client("127.0.0.1", port, identifier="labd-lab1-labd", **login)
                )
    watched = [f"{PREFIX}/jobs/+/events", f"{PREFIX}/errors", f"{PREFIX}/results/#"]
    async with Follower(port, topics=watched, **broker_login(OPS)) as ops:
        await attacks(port, marker)
        # labd's own topics cannot be forged: the broker drops a client's publish there.
        forged = {"event_id": "f", "job_id": "evil-4", "seq": 1, "kind": "finished"}
        await publish(
            port, f"{PREFIX}/jobs/evil-4/events", json.dumps(forged).encode(), **broker_login(CI)
        )
        await publish_signed(
            port, f"{PREFIX}/jobs/submit", {"id": "good", "spec": spec(2)}, CI, **broker_login(CI)
        )
        await ops.wait_for(lambda: finished(ops, "good"))
        await ops.wait_for(lambda: len(ops.on("errors")) >= 2)
    reasons = {e["reason"] for e in ops.on("errors")}
    assert {"unsigned", "invalid_spec"} <= reasons, ops.on("errors")
    problems = " ".join(" ".join(e["problems"]) for e in ops.on("errors"))
    assert "program 'sh' is not allowed by policy.programs" in problems
    assert not events_of(ops, "evil-4") and not events_of(ops, "evil-3")
    assert events_of(ops, "good")[-1]["state"] == "succeeded"
    assert not marker.exists()
    for job_id in ("evil-1", "evil-2", "evil-3"):
        assert daemon.get(f"/api/v1/jobs/{job_id}")[0] in (401, 403, 404)
    assert daemon.stop() == 0


@pytest.fixture
def mosquitto_with_acl(mosquitto_factory: Any, tmp_path: Path) -> Any:
    def start(config: Path) -> Any:
        out = tmp_path / "mosquitto-auth"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "labd",
                "--config",
                str(config),
                "auth",
                "mosquitto",
                "--out",
                str(out),
            ],
            check=True,
            capture_output=True,
        )
        return mosquitto_factory(
            f"allow_anonymous false\npassword_file {out / 'passwd'}\nacl_file {out / 'acl'}\n"
        )

    return start


async def test_mosquitto_with_generated_passwords_and_acl(
    mosquitto_with_acl: Any, start_labd: Any, tmp_path: Path
) -> None:
    port = free_port()
    mqtt = f'url = "mqtt://labd-host:s3cret-pw@127.0.0.1:{port}"'
    config = daemon_config(tmp_path, mqtt)
    local = ensure_local_credentials(tmp_path / "labd")  # as labd's first start writes them
    broker = mosquitto_with_acl(config)
    passwd = tmp_path / "mosquitto-auth" / "passwd"
    owner = pwd.getpwuid(passwd.stat().st_uid).pw_name
    assert (owner, stat.S_IMODE(passwd.stat().st_mode)) == ("mosquitto", 0o640)
    # The daemon listens where the config says: move it to the broker's port.
    config.write_text(config.read_text().replace(str(port), str(broker.port)))
    daemon: LabdProcess = start_labd(config)
    daemon.wait_for_log("mqtt connected")  # the credentials in mqtt.url are used
    assert "s3cret-pw" not in daemon.raw_log()
    await asyncio.sleep(2)  # the anonymous probe is refused: no warning (checked at the end)
    marker = tmp_path / "pwned"
    assert await cannot_connect(broker.port)
    watched = [f"{PREFIX}/jobs/+/events", f"{PREFIX}/errors"]
    async with Follower(broker.port, topics=watched, **broker_login(OPS)) as ops:
        await attacks(broker.port, marker)
        forged = {"event_id": "f", "job_id": "evil-4", "seq": 1, "kind": "finished"}
        await publish(
            broker.port,
            f"{PREFIX}/jobs/evil-4/events",
            json.dumps(forged).encode(),
            **broker_login(CI),
        )
        # A submitter cannot read another principal's answers.
        snoop = Follower(
            broker.port, topics=[f"{PREFIX}/replies/dash/#"], identifier="snoop", **broker_login(CI)
        )
        async with snoop:
            query = {"query": "list", "reply_to": f"{PREFIX}/replies/dash/q"}
            await publish_signed(
                broker.port, f"{PREFIX}/jobs/query", query, VIEWER, **broker_login(VIEWER)
            )
            await publish_signed(
                broker.port,
                f"{PREFIX}/jobs/submit",
                {"id": "good", "spec": spec(2)},
                CI,
                **broker_login(CI),
            )
            await ops.wait_for(lambda: finished(ops, "good"))
            # The local admin (`labd submit` on the daemon's host) has its account too.
            await publish_signed(
                broker.port,
                f"{PREFIX}/jobs/submit",
                {"id": "by-local", "spec": spec(1)},
                local,
                **broker_login(local),
            )
            await ops.wait_for(lambda: finished(ops, "by-local"))
            await asyncio.sleep(1)
        assert snoop.messages == []
    assert not marker.exists()
    assert not events_of(ops, "evil-4") and not events_of(ops, "evil-3")
    assert events_of(ops, "good")[-1]["state"] == "succeeded"
    assert "mqtt broker admits anonymous clients" not in daemon.raw_log()
    assert daemon.stop() == 0


async def test_a_broker_that_admits_anonymous_clients_is_warned_of(
    mosquitto_factory: Any, start_labd: Any, tmp_path: Path
) -> None:
    """labd used an open Mosquitto found on 1883 without a word, and anyone on the machine
    forged a job's retained state there (a tester's find)."""
    broker = mosquitto_factory()
    daemon: LabdProcess = start_labd(
        daemon_config(tmp_path, f'url = "mqtt://127.0.0.1:{broker.port}"')
    )
    said = daemon.wait_for_log("mqtt broker admits anonymous clients")
    assert said["level"] == "warning" and said["broker"] == f"127.0.0.1:{broker.port}"
    assert "labd auth mosquitto" in said["hint"]
    assert daemon.stop() == 0


async def test_a_replayed_request_is_refused_and_acts_once(
    mosquitto_factory: Any, start_labd: Any, tmp_path: Path
) -> None:
    broker = mosquitto_factory()
    daemon: LabdProcess = start_labd(
        daemon_config(tmp_path, f'url = "mqtt://127.0.0.1:{broker.port}"')
    )
    daemon.wait_for_log("mqtt connected")
    async with Follower(broker.port) as ci:
        topic = f"{PREFIX}/jobs/submit"
        captured = signed(topic, {"spec": spec(1)})  # no id: labd derives one from the nonce
        await publish(broker.port, topic, captured)
        await ci.wait_for(
            lambda: any(e.get("kind") == "finished" for _, e in ci.messages if isinstance(e, dict))
        )
        daemon.stop()
        daemon = start_labd(daemon.config)  # the nonce ledger survives a restart
        daemon.wait_for_log("mqtt connected")
        await publish(broker.port, topic, captured)
        await ci.wait_for(lambda: any(e["reason"] == "replayed" for e in ci.on("errors")))
    jobs = {body["job_id"] for t, body in ci.messages if t.endswith("/events")}
    assert len(jobs) == 1
    assert daemon.stop() == 0
