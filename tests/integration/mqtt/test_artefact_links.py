"""CI on another machine learns where a job's video is from the result message on MQTT, and
fetches it from the API of the host that ran the job with its own token."""

from __future__ import annotations

import asyncio
import socket
import urllib.request
from pathlib import Path
from typing import Any

from labd.mqtt.messages import ResultMessage
from tests.conftest import LabdProcess
from tests.integration.mqtt.conftest import CI, Follower, daemon_config, publish_signed, spec

PREFIX = "labd/v1/lab1"
WRITE_VIDEO = (
    "import os; os.makedirs('iteration-0', exist_ok=True); "
    "open('iteration-0/video.webm', 'wb').write(b'\\x1aE\\xdf\\xa3' + os.urandom(5000))"
)


def _fetch(url: str, token: str) -> bytes:
    """As CI would: `curl -H "Authorization: Bearer $TOKEN" URL`."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return bytes(answer.read())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_the_result_message_carries_artefact_urls_ci_can_fetch(
    mosquitto_factory: Any, start_labd: Any, tmp_path: Path
) -> None:
    broker = mosquitto_factory()
    api_port = _free_port()
    config = daemon_config(
        tmp_path,
        f'url = "mqtt://127.0.0.1:{broker.port}"',
        extra=f'[artefacts]\nbase_url = "http://127.0.0.1:{api_port}/"\n',
    )
    config.write_text(config.read_text().replace("api_port = 0", f"api_port = {api_port}"))
    daemon: LabdProcess = start_labd(config)
    daemon.wait_for_log("mqtt connected")
    job = spec(iterations=1) | {"params": {"command": ["python3", "-c", WRITE_VIDEO]}}
    async with Follower(broker.port) as ci:
        await ci.wait_for(lambda: ci.on("hosts/labd/status"))
        await publish_signed(broker.port, f"{PREFIX}/jobs/submit", {"id": "v1", "spec": job})
        await ci.wait_for(lambda: ci.on("results/mq/sleep"), within=30)
    (result,) = ci.on("results/mq/sleep")
    ResultMessage.model_validate(result)
    assert result["state"] == "succeeded", result
    links = {a["name"]: a for a in result["artefacts"]}
    video = links["iteration-0/video.webm"]
    url = f"http://127.0.0.1:{api_port}/api/v1/jobs/v1/artefacts/iteration-0/video.webm"
    assert (video["url"], video["kind"], video["content_type"]) == (url, "video", "video/webm")
    body = await asyncio.to_thread(_fetch, url, CI.token)
    on_disk = (tmp_path / "labd" / "jobs" / "v1" / "iteration-0" / "video.webm").read_bytes()
    assert body == on_disk and len(body) == video["size"]
    assert daemon.stop() == 0
