"""labd over MQTT against a real Mosquitto: submit, follow, malformed input."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import aiomqtt
import pytest
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from labd.mqtt.messages import HostStatus, JobEvent, ResultMessage
from tests.conftest import LabdProcess
from tests.integration.mqtt.conftest import (
    CI,
    OPS,
    Follower,
    daemon_config,
    publish,
    publish_signed,
    signed,
    spec,
    start_ci_client,
)

PREFIX = "labd/v1/lab1"


def events_of(follower: Follower, job_id: str) -> list[dict[str, Any]]:
    return follower.on(f"jobs/{job_id}/events")


def finished(follower: Follower, job_id: str) -> bool:
    return any(e["kind"] == "finished" for e in events_of(follower, job_id))


async def run_labd(config: Path, *args: str) -> tuple[int, str, str]:
    """`labd --config CONFIG ARGS` as a user runs it: its exit code, stdout and stderr."""
    process = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "labd", "--config", str(config), *args),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def assert_complete(events: list[dict[str, Any]]) -> None:
    """Every sequence number from 1 up, none missing (duplicates are allowed)."""
    seqs = sorted({e["seq"] for e in events})
    assert seqs == list(range(1, len(seqs) + 1)), seqs


async def test_submit_follow_and_result(
    mosquitto_factory: Any, start_labd: Any, tmp_path: Path
) -> None:
    broker = mosquitto_factory()
    daemon: LabdProcess = start_labd(
        daemon_config(tmp_path, f'url = "mqtt://127.0.0.1:{broker.port}"')
    )
    daemon.wait_for_log("mqtt connected")
    assert daemon.get("/readyz")[1]["checks"]["broker"] == "ok"
    async with Follower(broker.port) as ci:
        await ci.wait_for(lambda: ci.on("hosts/labd/status"))
        assert ci.on("hosts/labd/status")[-1]["status"] == "online"
        # An MQTT 5 client gets its answer on its response topic, with its correlation data.
        props = Properties(PacketTypes.PUBLISH)
        props.ResponseTopic = f"{PREFIX}/replies/ci/answers"
        props.CorrelationData = b"req-1"
        async with aiomqtt.Client(
            "127.0.0.1", broker.port, protocol=aiomqtt.ProtocolVersion.V5
        ) as client:
            await client.subscribe(f"{PREFIX}/replies/ci/answers", qos=1)
            body = signed(f"{PREFIX}/jobs/submit", {"id": "job-1", "spec": spec(3)})
            await client.publish(f"{PREFIX}/jobs/submit", body, qos=1, properties=props)
            async with asyncio.timeout(10):
                async for message in client.messages:
                    answer = json.loads(message.payload)  # type: ignore[arg-type]
                    assert message.properties.CorrelationData == b"req-1"  # type: ignore[union-attr]
                    break
        assert answer == {
            "schema_version": 1,
            "job_id": "job-1",
            "accepted": True,
            "duplicate": False,
            "state": "queued",
            "problems": [],
            "correlation": "",
            "reason": "",
        }
        await ci.wait_for(lambda: finished(ci, "job-1"))
        events = events_of(ci, "job-1")
        assert_complete(events)
        for event in events:  # what goes out is what schemas/ promises
            JobEvent.model_validate(event)
        kinds = [e["kind"] for e in sorted(events, key=lambda e: e["seq"])]
        assert kinds == [
            "queued",
            "leased",
            "running",
            "iteration",
            "iteration",
            "iteration",
            "finished",
        ]
        assert events[-1]["state"] == "succeeded"
        await ci.wait_for(lambda: ci.on("results/mq/sleep"))
        (result,) = ci.on("results/mq/sleep")
        ResultMessage.model_validate(result)
        HostStatus.model_validate(ci.on("hosts/labd/status")[-1])
        assert result["job_id"] == "job-1" and result["summary"]["wall_time_ms"]["n"] == 3
        # What the summary leaves out, as the API says it: `submit --wait` prints it.
        assert result["set_aside"] == {"count": 0, "by_variant": {}, "reasons": {}}
        assert ci.on("jobs/job-1/state")[-1]["state"] == "succeeded"
        devices = [b for t, b in ci.messages if t.startswith(f"{PREFIX}/devices/")]
        assert devices and devices[-1]["platform"] == "host"
    # Delivered rows are forgotten once the outbox goes quiet: it does not grow for ever.
    database = sqlite3.connect(tmp_path / "labd" / "labd.db")
    try:
        for _ in range(50):
            if database.execute("SELECT count(*) FROM outbox").fetchone() == (0,):
                break
            await asyncio.sleep(0.1)
        assert database.execute("SELECT count(*) FROM outbox").fetchone() == (0,)
    finally:
        database.close()
    assert daemon.stop() == 0


async def test_malformed_payloads_are_answered_and_other_jobs_unaffected(
    mosquitto_factory: Any, start_labd: Any, tmp_path: Path
) -> None:
    broker = mosquitto_factory()
    daemon: LabdProcess = start_labd(
        daemon_config(tmp_path, f'url = "mqtt://127.0.0.1:{broker.port}"')
    )
    daemon.wait_for_log("mqtt connected")
    submit = f"{PREFIX}/jobs/submit"
    bad = {
        "not JSON": b"{nope",
        "invalid UTF-8": b"\xff\xfe\xfa",
        "nested 100,000 deep": b"[" * 100_000,
        "wrong type": signed(submit, {"spec": {**spec(), "iterations": "many"}}),
        "missing field": signed(submit, {"id": "x1"}),
        "unknown field": signed(submit, {"spec": spec(), "colour": "red"}),
        "10 MB": b'{"spec": "' + b"a" * 10_000_000 + b'"}',
        "impossible device": signed(
            submit, {"id": "x2", "spec": {**spec(), "device": {"platform": "android"}}}
        ),
    }
    async with Follower(broker.port) as ci:
        for payload in bad.values():
            await publish(broker.port, submit, payload)
        await publish_signed(broker.port, submit, {"id": "fine", "spec": spec(2)})
        await publish_signed(broker.port, f"{PREFIX}/jobs/nope/cancel", {})
        await publish_signed(broker.port, f"{PREFIX}/jobs/pr%42/cancel", {})
        await publish_signed(
            broker.port, f"{PREFIX}/devices/host-labd/command", {"action": "drain"}, CI
        )
        await ci.wait_for(lambda: len(ci.on("errors")) >= len(bad) + 3 and finished(ci, "fine"))
        problems = [" ".join(e["problems"]) for e in ci.on("errors")]
        expected = [
            "payload is not JSON",
            "payload is not UTF-8",
            "payload is nested more than 64 levels deep",
            "spec.iterations: input should be a valid integer",
            "spec: field required",
            "colour: unknown key",
            "over the 262144 limit",
            "no device in the lab matches platform=android",
            "no job 'nope'",
            "job id 'pr%42' holds '%'; allowed:",  # the rule, not "no job"
            "principal 'ci' (submitter) may not administer",
        ]
        for fragment in expected:
            assert any(fragment in p for p in problems), (fragment, problems)
        rejected = events_of(ci, "x2")
        assert rejected and rejected[0]["kind"] == "rejected" and rejected[0]["seq"] == 0
        assert events_of(ci, "fine")[-1]["state"] == "succeeded"
        # The operator may drain the device; the CI system may not.
        device = next(
            b["device_id"]
            for t, b in ci.messages
            if t.endswith("/state") and t.startswith(f"{PREFIX}/devices/")
        )
        await publish_signed(
            broker.port, f"{PREFIX}/devices/{device}/command", {"action": "drain"}, OPS
        )
        await ci.wait_for(
            lambda: any(d["admin"] == "draining" for d in ci.on(f"devices/{device}/state"))
        )
    assert daemon.get("/healthz")[0] == 200
    assert daemon.stop() == 0


@pytest.mark.parametrize("iterations", [2, 0])
async def test_the_ci_client_example_follows_a_job_to_its_verdict(
    mosquitto_factory: Any, start_labd: Any, tmp_path: Path, iterations: int
) -> None:
    """To its end, or to its refusal: a spec refused by its schema (0 iterations) was said
    on <prefix>/errors alone, and the client waited for ever."""
    broker = mosquitto_factory()
    config = daemon_config(tmp_path, f'url = "mqtt://127.0.0.1:{broker.port}"')
    daemon: LabdProcess = start_labd(config)
    daemon.wait_for_log("mqtt connected")
    process = await start_ci_client(
        tmp_path,
        broker.port,
        f'suite = "ci"\ntest = "true"\nscenario = "command"\niterations = {iterations}\n'
        '[params]\ncommand = ["true"]\n',
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    lines = out.decode().splitlines()
    if iterations:
        assert process.returncode == 0, err.decode()
        assert (
            lines[0].startswith("#1 queued")
            and lines[-1].startswith("#")
            and "finished: succeeded" in lines[-1]
        )
    else:
        assert process.returncode == 1, err.decode()
        assert any("spec.iterations" in line for line in lines), lines
    assert daemon.stop() == 0


async def test_submit_wait_over_mqtt_prints_the_notes_the_values_give(
    mosquitto_factory: Any, start_labd: Any, tmp_path: Path
) -> None:
    """Over MQTT `submit --wait` had the summary alone: no stopping note, no diagnostics,
    where `jobs results` has them (a re-tester's find)."""
    broker = mosquitto_factory()
    config = daemon_config(tmp_path, f'url = "mqtt://127.0.0.1:{broker.port}"')
    daemon: LabdProcess = start_labd(config)
    daemon.wait_for_log("mqtt connected")
    manifest = tmp_path / "stable.toml"
    manifest.write_text(
        'suite = "cli"\ntest = "stable"\nscenario = "command"\niterations = 15\nwarmup = 0\n'
        'stop_when_stable = true\nstable_effect = 0.5\n[params]\ncommand = ["true"]\n'
    )
    code, out, err = await run_labd(config, "submit", str(manifest), "--wait")
    assert code == 0, err
    assert "stop_when_stable: " in out and "measured iterations (at most 15)" in out, out
    assert daemon.stop() == 0


async def test_the_cli_checks_a_request_against_the_labs_own_payload_limit(
    mosquitto_factory: Any, start_labd: Any, tmp_path: Path
) -> None:
    """A CI machine's configuration is not the lab's: the CLI refused a request under the
    lab's larger limit and sent one over its smaller one, which got no answer. The host's
    retained status says its limit, and the CLI checks against that."""
    broker = mosquitto_factory()
    url = f'url = "mqtt://127.0.0.1:{broker.port}"'
    daemon_cfg = daemon_config(tmp_path, f"{url}\nmax_payload_bytes = 600000")
    daemon: LabdProcess = start_labd(daemon_cfg)
    daemon.wait_for_log("mqtt connected")
    ci_cfg = tmp_path / "ci.toml"  # the lab's but its limit: the default, 262,144
    ci_cfg.write_text(daemon_cfg.read_text().replace("max_payload_bytes = 600000", ""))

    # A command's arguments are capped at 128 KiB a variant: an A/B job carries three sets.
    def manifest(arg_bytes: int) -> str:
        command = f'command = ["true", "{"x" * arg_bytes}"]\n'
        head = 'suite = "cli"\ntest = "big"\nscenario = "command"\niterations = 1\n'
        return f"{head}[params]\n{command}[ab.base.params]\n{command}[ab.new.params]\n{command}"

    large, too_large = tmp_path / "large.toml", tmp_path / "too-large.toml"
    large.write_text(manifest(100_000))
    too_large.write_text(manifest(250_000))
    code, out, err = await run_labd(ci_cfg, "submit", str(large), "--id", "large-1")
    assert (code, out) == (0, "queued large-1\n"), err
    code, out, err = await run_labd(ci_cfg, "submit", str(too_large), "--id", "large-2")
    assert code == 2 and "over the 600,000 labd takes over MQTT" in err, (code, out, err)
    assert daemon.stop() == 0


async def test_cli_show_and_cancel_over_mqtt(
    mosquitto_factory: Any, start_labd: Any, tmp_path: Path
) -> None:
    broker = mosquitto_factory()
    config = daemon_config(tmp_path, f'url = "mqtt://127.0.0.1:{broker.port}"')
    daemon: LabdProcess = start_labd(config)
    daemon.wait_for_log("mqtt connected")

    async def labd(*args: str) -> tuple[int, str, str]:
        return await run_labd(config, *args)

    manifest = tmp_path / "slow.toml"
    manifest.write_text(
        'suite = "cli"\ntest = "slow"\nscenario = "command"\niterations = 50\n'
        '[params]\ncommand = ["sleep", "0.2"]\n'
    )
    assert (await labd("submit", str(manifest), "--id", "slow-1"))[:2] == (0, "queued slow-1\n")
    # Over the payload limit labd refuses a request unread, with no answer: the CLI says so at
    # once, where it waited 15 s and said labd was not running (a tester's find).
    big = tmp_path / "big.toml"
    big.write_text(manifest.read_text() + f'[params.env]\nPAD = "{"x" * 300_000}"\n')
    code, out, err = await labd("submit", str(big), "--id", "big-1")
    assert code == 2 and "over the 262,144 labd takes over MQTT" in err, (code, out, err)
    # The same id again: harmless (a CI step retried), said at once, not after a time-out.
    began = time.monotonic()
    code, out, err = await labd("submit", str(manifest), "--id", "slow-1")
    assert code == 0 and out.startswith("job slow-1 exists ("), (out, err)
    assert out.endswith("): submitted before with this spec\n")
    assert time.monotonic() - began < 10
    # Followed with --wait: said as soon as labd answers, not once the job has ended.
    follower = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "labd", "--config", str(config), "submit", str(manifest)),
        *("--id", "slow-1", "--wait"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert follower.stderr is not None
    said = await asyncio.wait_for(follower.stderr.readline(), 30)
    assert said.decode().startswith("job slow-1 exists ("), said
    assert said.split(b"(")[1].split(b")")[0] in (b"queued", b"leased", b"running"), said
    async with Follower(broker.port) as ci:
        await ci.wait_for(lambda: any(e["kind"] == "iteration" for e in events_of(ci, "slow-1")))
        code, out, _ = await labd("jobs", "show", "slow-1", "--via", "mqtt")
        assert (code, out) == (0, "slow-1: running\n")
        code, out, _ = await labd("jobs", "cancel", "slow-1", "--via", "mqtt")
        # Its state when asked: the cancel may have taken effect already.
        assert code == 0 and out in ("slow-1: running (cancel requested)\n", "slow-1: cancelled\n")
        await ci.wait_for(lambda: finished(ci, "slow-1"))
        assert events_of(ci, "slow-1")[-1]["state"] == "cancelled"
    await asyncio.wait_for(follower.communicate(), 60)
    assert follower.returncode == 3  # followed to its end: cancelled, not succeeded
    code, out, _ = await labd("jobs", "show", "slow-1", "--via", "mqtt")
    assert (code, out) == (0, "slow-1: cancelled\n")
    # Cancelled again once it has ended: the answer is ok, and the state says nothing changed
    # (it said "cancel sent (the job's events say when it took effect)").
    code, out, _ = await labd("jobs", "cancel", "slow-1", "--via", "mqtt")
    assert (code, out) == (0, "slow-1: cancelled\n")
    # The broker lost the retained state (restarted without persistence): labd is asked.
    async with aiomqtt.Client("127.0.0.1", broker.port) as client:
        await client.publish(f"{PREFIX}/jobs/slow-1/state", b"", qos=1, retain=True)
    code, out, _ = await labd("jobs", "show", "slow-1", "--via", "mqtt")
    assert (code, out) == (0, "slow-1: cancelled\n")
    # Waited for again once it has ended: its results at once, exit 3 (it did not succeed).
    code, out, err = await labd("submit", str(manifest), "--id", "slow-1", "--wait", "--json")
    assert code == 3 and json.loads(out)["job"]["state"] == "cancelled", (out, err)
    code, out, _ = await labd("jobs", "list", "--via", "mqtt", "--json")
    assert code == 0 and [j["id"] for j in json.loads(out)["jobs"]] == ["slow-1"]
    code, out, _ = await labd("jobs", "results", "slow-1", "--via", "mqtt", "--format", "csv")
    rows = out.strip().splitlines()
    assert code == 0 and rows[0].startswith("job_id,attempt") and len(rows) > 1
    code, _, err = await labd("jobs", "results", "nope", "--via", "mqtt")
    assert (code, err.strip()) == (2, "labd/v1/lab1/jobs/query: no job 'nope'")
    code, _, err = await labd("submit", str(tmp_path / "missing.toml"))
    assert code == 2 and "missing.toml" in err
    assert daemon.stop() == 0


async def test_a_regression_against_the_baseline_is_published_as_an_alert(
    mosquitto_factory: Any, start_labd: Any, tmp_path: Path
) -> None:
    from labd.mqtt.messages import AlertMessage

    broker = mosquitto_factory()
    daemon: LabdProcess = start_labd(
        daemon_config(tmp_path, f'url = "mqtt://127.0.0.1:{broker.port}"')
    )
    daemon.wait_for_log("mqtt connected")
    async with Follower(broker.port) as ci:
        fast = {**spec(6, 0.02), "build": {"revision": "r1"}}
        slow = {**spec(6, 0.1), "build": {"revision": "r2"}, "baseline": "r1"}
        await publish_signed(broker.port, f"{PREFIX}/jobs/submit", {"id": "r1-run", "spec": fast})
        await ci.wait_for(lambda: finished(ci, "r1-run"))
        await publish_signed(broker.port, f"{PREFIX}/jobs/submit", {"id": "r2-run", "spec": slow})
        await ci.wait_for(lambda: any(a["metric"] == "wall_time_ms" for a in ci.on("alerts")))
    alert = AlertMessage.model_validate(
        next(a for a in ci.on("alerts") if a["metric"] == "wall_time_ms")
    )
    assert (alert.job_id, alert.baseline_job_id, alert.verdict) == (
        "r2-run",
        "r1-run",
        "regression",
    )
    assert alert.ratio_ci_low > 2
    assert daemon.stop() == 0


async def test_a_host_that_stops_leaves_its_devices_retained_offline(
    mosquitto_factory: Any, start_labd: Any, tmp_path: Path
) -> None:
    """A device's retained state said "available" (or "busy" with a job) for as long as its
    stopped host stayed away: the pool marks it offline only after the bridge has gone."""
    broker = mosquitto_factory()
    daemon: LabdProcess = start_labd(
        daemon_config(tmp_path, f'url = "mqtt://127.0.0.1:{broker.port}"')
    )
    daemon.wait_for_log("mqtt connected")
    async with Follower(broker.port, identifier="first") as ci:
        await ci.wait_for(lambda: any(t.startswith(f"{PREFIX}/devices/") for t, _ in ci.messages))
    assert daemon.stop() == 0
    # A subscriber arriving later reads what is retained.
    async with Follower(broker.port, identifier="later") as later:
        await later.wait_for(lambda: later.on("hosts/labd/status"))
        await asyncio.sleep(0.5)  # every retained message comes at once on subscribing
    states = [body for topic, body in later.messages if topic.startswith(f"{PREFIX}/devices/")]
    assert states and all(s["state"] == "offline" for s in states), states
    assert all(s["reason"] == "labd stopped" for s in states)
    assert later.on("hosts/labd/status")[-1]["status"] == "offline"


async def test_the_cli_takes_the_answer_of_the_host_that_knows_its_key(
    mosquitto_factory: Any, start_labd: Any, tmp_path: Path
) -> None:
    """In a lab of two hosts each has its own `local` key: the other host refused the local
    admin's requests as `bad_signature` on <prefix>/errors, the CLI took that for the answer
    and exited 2, though this host answered (and ran the job). A refusal of the credentials is
    final only when no host answers within a moment."""
    broker = mosquitto_factory()
    config = daemon_config(tmp_path, f'url = "mqtt://127.0.0.1:{broker.port}"')
    daemon: LabdProcess = start_labd(config)
    daemon.wait_for_log("mqtt connected")

    async def other_host(client: aiomqtt.Client) -> None:
        """A host of the lab that knows no such key: refuses every request at once."""
        async for message in client.messages:
            request = json.loads(message.payload)  # type: ignore[arg-type]
            refusal = {"schema_version": 2, "topic": message.topic.value, "reason": "bad_signature",
                       "problems": ["signature does not match"], "principal": "local",
                       "correlation": request.get("correlation", "")}  # fmt: skip
            await client.publish(f"{PREFIX}/errors", json.dumps(refusal).encode(), qos=1)

    async def labd(*args: str) -> tuple[int, str, str]:
        return await run_labd(config, *args)

    manifest = tmp_path / "quick.toml"
    manifest.write_text('suite = "cli"\ntest = "quick"\nscenario = "command"\niterations = 1\n'
                        '[params]\ncommand = ["true"]\n')  # fmt: skip
    async with aiomqtt.Client("127.0.0.1", broker.port) as client:
        await client.subscribe(f"{PREFIX}/jobs/#")
        refusing = asyncio.create_task(other_host(client))
        try:
            code, out, err = await labd("submit", str(manifest), "--id", "q-1", "--wait")
            assert code == 0 and "succeeded" in out, (out, err)
            code, out, err = await labd("jobs", "show", "q-1", "--via", "mqtt")
            assert (code, out) == (0, "q-1: succeeded\n"), err
        finally:
            refusing.cancel()
    assert daemon.stop() == 0


async def test_an_ended_jobs_retained_state_expires_and_nothing_else_does(
    mosquitto_factory: Any, start_labd: Any, tmp_path: Path
) -> None:
    """Every job left its retained `jobs/<id>/state` for good: 3,588 after a tester's 3,585
    jobs, 600,000 a month in a busy lab, sent to every new subscriber of labd/#."""
    broker = mosquitto_factory()
    mqtt = f'url = "mqtt://127.0.0.1:{broker.port}"\nended_state_expiry_h = 0.0005'  # 2 s
    daemon: LabdProcess = start_labd(daemon_config(tmp_path, mqtt))
    daemon.wait_for_log("mqtt connected")
    async with Follower(broker.port, identifier="ci") as ci:
        await publish_signed(broker.port, f"{PREFIX}/jobs/submit", {"id": "ended", "spec": spec(1)})
        await ci.wait_for(lambda: finished(ci, "ended"))
    ended_at = time.monotonic()

    async def retained() -> list[str]:
        async with Follower(broker.port, identifier=f"later-{time.monotonic()}") as later:
            await later.wait_for(lambda: later.on("hosts/labd/status"))
            await asyncio.sleep(0.5)  # every retained message comes at once on subscribing
        return sorted({topic.removeprefix(f"{PREFIX}/") for topic, _ in later.messages})

    soon = await retained()
    assert "jobs/ended/state" in soon and time.monotonic() - ended_at < 2
    await asyncio.sleep(max(0.0, ended_at + 3 - time.monotonic()))
    later = await retained()
    assert "jobs/ended/state" not in later
    assert "hosts/labd/status" in later and any(t.startswith("devices/") for t in later)
    assert daemon.stop() == 0
