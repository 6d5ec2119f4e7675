"""What an admitted but hostile client tries against labd on a real Mosquitto: knocking it off
the broker with a reply topic the broker finds malformed, taking over a CI client's session,
and replaying a retained request labd refused."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiomqtt

from tests.conftest import LabdProcess
from tests.integration.mqtt.conftest import (
    VIEWER,
    Follower,
    daemon_config,
    publish,
    signed,
    spec,
    start_ci_client,
)
from tests.integration.mqtt.test_bridge import PREFIX


async def test_a_reply_topic_the_broker_finds_malformed_never_knocks_labd_off(
    mosquitto_factory: Any, start_labd: Any, tmp_path: Path
) -> None:
    """A viewer's query answered on .../replies/dash/<NUL> (or DEL, or U+FDD0) made Mosquitto
    drop labd's connection, about 10 s without the lab each time: it is refused on errors."""
    broker = mosquitto_factory()
    daemon: LabdProcess = start_labd(
        daemon_config(tmp_path, f'url = "mqtt://127.0.0.1:{broker.port}"')
    )
    daemon.wait_for_log("mqtt connected")
    mine = f"{PREFIX}/replies/{VIEWER.principal}"
    async with Follower(broker.port, topics=[f"{PREFIX}/errors", f"{mine}/#"]) as dash:
        for bad in ("\x00", "\x7f", "\ufdd0"):
            body = {"query": "list", "reply_to": f"{mine}/{bad}"}
            await publish(
                broker.port, f"{PREFIX}/jobs/query", signed(f"{PREFIX}/jobs/query", body, VIEWER)
            )
        await dash.wait_for(lambda: len(dash.on("errors")) == 3, within=20)
        for refused, bad in zip(dash.on("errors"), ("U+0000", "U+007F", "U+FDD0"), strict=True):
            assert refused["reason"] == "invalid" and f"({bad})" in refused["problems"][0]
        body = {"query": "list", "reply_to": f"{mine}/ok"}
        await publish(
            broker.port, f"{PREFIX}/jobs/query", signed(f"{PREFIX}/jobs/query", body, VIEWER)
        )
        await dash.wait_for(lambda: dash.on("replies/dash/ok"), within=20)
    assert "mqtt connection lost" not in daemon.raw_log()
    assert daemon.stop() == 0


async def test_the_ci_client_example_cannot_be_kicked_off_by_its_job_id(
    mosquitto_factory: Any, start_labd: Any, tmp_path: Path
) -> None:
    """The example connected with the job id as its client id, which jobs/+/events makes
    public: a viewer connecting with it took the session and the CI client died."""
    broker = mosquitto_factory()
    daemon: LabdProcess = start_labd(
        daemon_config(tmp_path, f'url = "mqtt://127.0.0.1:{broker.port}"')
    )
    daemon.wait_for_log("mqtt connected")
    async with Follower(broker.port, topics=[f"{PREFIX}/jobs/+/events"]) as viewer:
        process = await start_ci_client(
            tmp_path,
            broker.port,
            'suite = "ci"\ntest = "slow"\nscenario = "command"\niterations = 1\nwarmup = 0\n'
            '[params]\ncommand = ["sleep", "3"]\n',
        )
        await viewer.wait_for(lambda: viewer.messages, within=30)
        job_id = viewer.messages[0][1]["job_id"]
        # The squatter takes whatever session goes by that id, and stays connected.
        async with aiomqtt.Client("127.0.0.1", broker.port, identifier=job_id):
            out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    assert "finished: succeeded" in out.decode().splitlines()[-1]
    assert daemon.stop() == 0


async def test_a_retained_refused_request_is_not_handled_again_at_reconnect(
    mosquitto_factory: Any, start_labd: Any, tmp_path: Path
) -> None:
    """A refused submission's nonce was never recorded: left retained on the broker, it was
    handled (and refused) again at every reconnect of labd. The second time it is replayed."""
    broker = mosquitto_factory()
    config = daemon_config(tmp_path, f'url = "mqtt://127.0.0.1:{broker.port}"')
    daemon: LabdProcess = start_labd(config)
    daemon.wait_for_log("mqtt connected")
    topic = f"{PREFIX}/jobs/submit"
    shell = {**spec(1), "params": {"command": ["sh", "-c", "true"]}}  # the policy says no
    async with Follower(broker.port, topics=[f"{PREFIX}/errors"]) as ops:
        async with aiomqtt.Client("127.0.0.1", broker.port) as client:
            payload = signed(topic, {"id": "kept", "spec": shell})
            await client.publish(topic, payload, qos=1, retain=True)
        await ops.wait_for(lambda: ops.on("errors"))
        assert ops.on("errors")[0]["reason"] == "invalid_spec"
        assert daemon.stop() == 0
        daemon = start_labd(config)
        daemon.wait_for_log("mqtt connected")
        await ops.wait_for(lambda: len(ops.on("errors")) == 2)
        assert ops.on("errors")[1]["reason"] == "replayed", ops.on("errors")
    assert daemon.stop() == 0
