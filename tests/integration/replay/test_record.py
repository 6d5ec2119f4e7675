"""Recording through the proxy from real origins (HTTP and HTTPS), then replaying it."""

from __future__ import annotations

import asyncio
import json
import signal
import ssl
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from subprocess import PIPE

import aiohttp
import pytest
import trustme
from aiohttp import web

from labd.replay.certs import CA_CERT, write_ca
from labd.replay.har import load
from labd.replay.process import ReplayProcess
from labd.replay.shaping import PROFILES

PNG = bytes([0x89, 0x50, 0x4E, 0x47]) + bytes(range(256))


@pytest.fixture
async def origins(tmp_path: Path) -> AsyncIterator[tuple[int, int, Path]]:
    """An HTTP and an HTTPS origin on loopback; yields their ports and the HTTPS CA file."""

    async def page(request: web.Request) -> web.Response:
        return web.Response(text=f"<p>{request.query.get('q', '')}</p>", content_type="text/html")

    async def image(_: web.Request) -> web.Response:
        return web.Response(body=PNG, content_type="image/png")

    async def echo(request: web.Request) -> web.Response:
        return web.Response(text=(await request.text()).upper(), status=201)

    app = web.Application()
    app.add_routes([web.get("/", page), web.get("/logo.png", image), web.post("/api", echo)])
    authority = trustme.CA()
    cert = authority.issue_cert("127.0.0.1", "localhost")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(context)
    ca_file = tmp_path / "origin-ca.pem"
    authority.cert_pem.write_to_path(str(ca_file))
    runner = web.AppRunner(app)
    await runner.setup()
    plain = web.TCPSite(runner, "127.0.0.1", 0)
    secure = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await plain.start()
    await secure.start()
    ports = [site._server.sockets[0].getsockname()[1] for site in (plain, secure)]  # type: ignore[union-attr]
    yield ports[0], ports[1], ca_file
    await runner.cleanup()


async def test_record_then_replay(origins: tuple[int, int, Path], tmp_path: Path) -> None:
    http_port, https_port, origin_ca = origins
    write_ca(tmp_path / "ca")
    replay_ca = ssl.create_default_context(cafile=str(tmp_path / "ca" / CA_CERT))
    out = tmp_path / "site.har"
    command = [sys.executable, "-m", "labd", "replay", "record", str(out), "--port", "0"]
    command += ["--ca", str(tmp_path / "ca"), "--upstream-ca", str(origin_ca)]
    recorder = await asyncio.create_subprocess_exec(*command, stdout=PIPE, stderr=PIPE)
    assert recorder.stdout is not None
    proxy = f"http://127.0.0.1:{json.loads(await recorder.stdout.readline())['listening']}"
    site = f"http://127.0.0.1:{http_port}"
    secure = f"https://localhost:{https_port}"
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{site}/?q=hello", proxy=proxy) as r:
            assert await r.text() == "<p>hello</p>"
        async with http.get(f"{secure}/logo.png", proxy=proxy, ssl=replay_ca) as r:
            assert await r.read() == PNG
        async with http.post(f"{site}/api", data=b"ping", proxy=proxy) as r:
            assert (r.status, await r.text()) == (201, "PING")
        async with http.get("http://127.0.0.1:9/unreachable", proxy=proxy) as r:
            assert r.status == 502
    recorder.send_signal(signal.SIGINT)
    _, err = await asyncio.wait_for(recorder.communicate(), 30)
    assert recorder.returncode == 0, err
    assert b"3 entries written" in err

    har = json.loads(out.read_text())
    assert har["log"]["version"] == "1.2"
    logo = next(e for e in har["log"]["entries"] if e["request"]["url"].endswith("/logo.png"))
    assert logo["response"]["content"]["encoding"] == "base64"

    archive = load(out, 2**20)
    assert len(archive) == 3
    server = ReplayProcess(out, PROFILES["none"], ca=tmp_path / "ca")
    await server.start()
    try:
        proxy = f"http://127.0.0.1:{server.port}"
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{site}/?q=hello", proxy=proxy) as r:
                assert await r.text() == "<p>hello</p>"
            async with http.get(f"{secure}/logo.png", proxy=proxy, ssl=replay_ca) as r:
                assert await r.read() == PNG
            async with http.post(f"{site}/api", data=b"ping", proxy=proxy) as r:
                assert (r.status, await r.text()) == (201, "PING")
    finally:
        summary = await server.stop()
    assert summary["served"] == 3 and summary["missed"] == 0
