"""Recording through the proxy from real origins (HTTP and HTTPS), then replaying it."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import random
import signal
import ssl
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from subprocess import PIPE

import aiohttp
import pytest
import trustme
from aiohttp import web

from labd.replay.certs import CA_CERT, write_ca
from labd.replay.encoding import DECODERS
from labd.replay.har import load
from labd.replay.process import ReplayProcess
from labd.replay.shaping import PROFILES, Profile

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


class Origin:
    """A raw origin on loopback: /hang never answers, /endless streams for ever, /bomb is
    gzip of 8 MiB of zeros (8 KiB on the wire), /short promises more than it sends, anything
    else is a small page. It counts the connections open to it."""

    def __init__(self) -> None:
        self.open = 0
        self.bomb = gzip.compress(b"\0" * 8 * 2**20)

    async def start(self) -> int:
        self.server = await asyncio.start_server(self.serve, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.open += 1
        try:
            path = (await reader.readuntil(b"\r\n\r\n")).split()[1]
            if path == b"/hang":
                await reader.read()  # until the recorder gives up on it
            elif path == b"/endless":
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n\r\n")
                while True:
                    writer.write(b"z" * 65536)
                    await writer.drain()
            elif path == b"/bomb":
                head = (
                    f"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: {len(self.bomb)}"
                )
                writer.write(head.encode() + b"\r\n\r\n" + self.bomb)
            elif path == b"/short":
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nonly a bit")
            else:
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self.open -= 1
            writer.close()


@pytest.fixture
async def origin() -> AsyncIterator[tuple[Origin, int]]:
    server = Origin()
    port = await server.start()
    yield server, port
    server.server.close()


Recorder = Callable[..., Awaitable[tuple[asyncio.subprocess.Process, int]]]


@pytest.fixture
async def recording() -> AsyncIterator[Recorder]:
    """Starts `labd replay record OUT OPTIONS...`: (the process, its port); killed after the
    test if it still runs."""
    started = []

    async def start(out: Path, *options: str) -> tuple[asyncio.subprocess.Process, int]:
        command = [sys.executable, "-m", "labd", "replay", "record", str(out), "--port", "0"]
        recorder = await asyncio.create_subprocess_exec(
            *command, *options, stdout=PIPE, stderr=PIPE
        )
        started.append(recorder)
        assert recorder.stdout is not None
        return recorder, json.loads(await recorder.stdout.readline())["listening"]

    yield start
    for recorder in started:
        if recorder.returncode is None:
            recorder.kill()
            await recorder.wait()


async def recorded(recorder: asyncio.subprocess.Process, out: Path) -> list[str]:
    recorder.send_signal(signal.SIGINT)
    await asyncio.wait_for(recorder.communicate(), 30)
    return [e["request"]["url"] for e in json.loads(out.read_text())["log"]["entries"]]


async def test_a_request_for_the_recorder_itself_is_refused(
    recording: Recorder, tmp_path: Path
) -> None:
    """It went round through itself until the 64 upstream slots were full; then everyone hung."""
    out = tmp_path / "site.har"
    recorder, port = await recording(out)
    proxy = f"http://127.0.0.1:{port}"
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http:
        for url in (f"http://127.0.0.1:{port}/", f"http://localhost:{port}/x"):
            async with http.get(url, proxy=proxy) as r:
                assert r.status == 400 and "is this recorder itself" in await r.text()
        async with http.get(f"http://127.0.0.1:{port}/", headers={"Host": f"[::1]:{port}"}) as r:
            assert r.status == 400  # origin-form, asking for itself by another name
    recorder.send_signal(signal.SIGINT)
    _, err = await asyncio.wait_for(recorder.communicate(), 30)
    assert f"nothing recorded; {out} not created" in err.decode() and not out.exists()


async def test_an_archive_is_replaced_only_when_asked_and_never_by_nothing(
    origin: tuple[Origin, int], recording: Recorder, tmp_path: Path
) -> None:
    """A recording stopped at once, with nothing in it, replaced a 3 MB archive of 11 entries
    with one of none ("entries": [])."""
    _, port = origin
    out = tmp_path / "site.har"
    out.write_text("recorded before")
    recorder, _ = await recording(out, "--overwrite")
    recorder.send_signal(signal.SIGINT)
    said, err = await asyncio.wait_for(recorder.communicate(), 30)
    assert recorder.returncode == 0
    assert f"labd replay: nothing recorded; {out} left as it was" in err.decode()
    assert json.loads(said)["archive"] is None
    assert out.read_text() == "recorded before" and not list(tmp_path.glob("*.partial"))
    recorder, recorder_port = await recording(out, "--overwrite")
    async with aiohttp.ClientSession() as http:
        page = f"http://127.0.0.1:{port}/page"
        async with http.get(page, proxy=f"http://127.0.0.1:{recorder_port}") as r:
            assert r.status == 200
    assert await recorded(recorder, out) == [page]


async def test_a_hanging_origin_holds_neither_the_others_nor_its_slots(
    origin: tuple[Origin, int], recording: Recorder, tmp_path: Path
) -> None:
    """70 requests to an origin that never answers used to take all 64 shared upstream slots,
    every other origin waiting behind them, and to keep them after the clients had left."""
    server, port = origin
    out = tmp_path / "site.har"
    recorder, recorder_port = await recording(out)
    proxy = f"http://127.0.0.1:{recorder_port}"
    async with aiohttp.ClientSession() as http:
        hanging = [
            asyncio.ensure_future(http.get(f"http://127.0.0.1:{port}/hang", proxy=proxy))
            for _ in range(70)
        ]
        await asyncio.sleep(1)
        assert server.open == 16  # one origin's share
        other = f"http://localhost:{port}/page"  # another origin: same server, another name
        async with http.get(other, proxy=proxy, timeout=aiohttp.ClientTimeout(total=3)) as r:
            assert r.status == 200
        for request in hanging:
            request.cancel()  # the clients leave...
        await asyncio.gather(*hanging, return_exceptions=True)
        for _ in range(20):
            await asyncio.sleep(0.1)
            if server.open == 0:
                break
        assert server.open == 0  # ...and so do their requests to the origin
        page = f"http://127.0.0.1:{port}/page"
        async with http.get(page, proxy=proxy, timeout=aiohttp.ClientTimeout(total=3)) as r:
            assert r.status == 200
    assert sorted(await recorded(recorder, out)) == [f"http://127.0.0.1:{port}/page", other]


async def test_bodies_over_the_limit_or_cut_short_are_refused_and_not_recorded(
    origin: tuple[Origin, int], recording: Recorder, tmp_path: Path
) -> None:
    """An endless body grew the recorder to 7 GB and was recorded when the origin died; 200 KB
    of gzip became a 200 MB entry."""
    _, port = origin
    out = tmp_path / "site.har"
    recorder, recorder_port = await recording(out, "--max-body-mb", "1")
    proxy = f"http://127.0.0.1:{recorder_port}"
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
        for path, says in (
            ("/endless", "over the limit of 1 MiB"),
            ("/bomb", "over the limit of 1 MiB"),
            ("/short", "not recorded"),
        ):
            url = f"http://127.0.0.1:{port}{path}"
            async with http.get(url, proxy=proxy) as r:
                text = await r.text()
                assert r.status == 502 and url in text and says in text, text
        async with http.get(f"http://127.0.0.1:{port}/page", proxy=proxy) as r:
            assert r.status == 200
        peak_kib = int(
            next(
                line.split()[1]
                for line in Path(f"/proc/{recorder.pid}/status").read_text().splitlines()
                if line.startswith("VmHWM:")
            )
        )
    assert peak_kib < 200 * 1024  # Python, aiohttp and a body at the limit, not the stream
    assert await recorded(recorder, out) == [f"http://127.0.0.1:{port}/page"]


def _page(words: int) -> bytes:
    """HTML of words drawn from a small vocabulary: compresses about as a page does."""
    draw = random.Random(7)
    vocabulary = [f"word{n}" for n in range(400)]
    return ("<p>" + " ".join(draw.choice(vocabulary) for _ in range(words)) + "</p>").encode()


async def _raw_get(
    port: int, path: str, accept: str, method: str = "GET"
) -> tuple[int, dict[str, str], bytes, int]:
    """(status, headers, body as sent, bytes on the wire) of one request in origin form."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = f"{method} {path} HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n"
    head += f"Accept-Encoding: {accept}\r\n" if accept else ""
    writer.write(head.encode() + b"\r\n")
    received = await asyncio.wait_for(reader.read(), 30)
    writer.close()
    top, _, body = received.partition(b"\r\n\r\n")
    lines = top.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body, len(received)


async def _origin(routes: list[web.RouteDef]) -> tuple[web.AppRunner, int]:
    """An origin serving `routes` on loopback: its runner (to clean up) and its port."""
    app = web.Application()
    app.add_routes(routes)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


async def test_a_gzipped_page_is_recorded_decoded_and_replayed_gzipped(
    recording: Recorder, tmp_path: Path
) -> None:
    """The origin sent 70 bytes of gzip; the HAR kept 11,000 decoded bytes and no
    Content-Encoding, and replay sent all 11,000 under the bandwidth limit (157 times the
    bytes the page cost). A HEAD of the page was a 404 miss."""
    page = _page(60_000)  # about 540 KB, 130 KB of gzip
    zipped = gzip.compress(page)
    asked: list[str] = []

    async def gzipped(request: web.Request) -> web.Response:
        asked.append(request.headers.get("Accept-Encoding", ""))
        headers = {"Content-Encoding": "gzip", "Content-Type": "text/html"}
        return web.Response(body=zipped, headers=headers)

    runner, origin_port = await _origin([web.get("/page", gzipped)])
    out = tmp_path / "site.har"
    try:
        recorder, port = await recording(out)
        async with aiohttp.ClientSession() as http:
            browser = {"Accept-Encoding": "gzip, deflate, br, zstd, compress, *;q=0.1"}
            async with http.get(
                f"http://127.0.0.1:{origin_port}/page",
                proxy=f"http://127.0.0.1:{port}",
                headers=browser,
            ) as r:
                assert r.status == 200 and await r.read() == page
        await recorded(recorder, out)
    finally:
        await runner.cleanup()
    # br (a browser's first choice) is asked for only when the recorder can decode it: it was
    # a 502 and nothing recorded. So were compress, and what "*" let the origin choose.
    assert ("br" in asked[0]) == ("br" in DECODERS) and "gzip" in asked[0]
    assert not {"zstd", "compress", "*"} & {c.split(";")[0].strip() for c in asked[0].split(",")}
    (entry,) = json.loads(out.read_text())["log"]["entries"]
    response = entry["response"]
    assert hashlib.md5(response["content"]["text"].encode()).digest() == hashlib.md5(page).digest()
    assert {"name": "Content-Encoding", "value": "gzip"} in response["headers"]
    assert response["bodySize"] == len(zipped)
    assert response["content"]["compression"] == len(page) - len(zipped)

    # Recorded as 127.0.0.1:PORT; asked for below in origin form, as site.test.
    entry["request"]["url"] = "http://site.test/page"
    out.write_text(json.dumps({"log": {"entries": [entry]}}))
    server = ReplayProcess(out, Profile(down_kbps=8000))  # 1 MB/s
    await server.start()
    try:
        began = time.perf_counter()
        status, headers, body, wire = await _raw_get(server.port, "/page", "gzip, deflate, br")
        took = time.perf_counter() - began
        plain = await _raw_get(server.port, "/page", "")
        head = await _raw_get(server.port, "/page", "gzip", method="HEAD")
    finally:
        summary = await server.stop()
    assert status == 200 and headers["content-encoding"] == "gzip"
    assert int(headers["content-length"]) == len(body) and wire < len(zipped) * 1.1
    assert hashlib.md5(gzip.decompress(body)).digest() == hashlib.md5(page).digest()
    assert took < len(page) / 1e6 / 2  # the link carried the gzip, not the page decoded
    assert wire / 1e6 * 0.9 <= took
    # A client that does not accept gzip gets the page as it is, its length as sent.
    assert "content-encoding" not in plain[1] and plain[2] == page
    assert int(plain[1]["content-length"]) == len(page)
    # HEAD, recorded only as a GET: the GET's status and headers, no body.
    assert head[0] == 200 and head[2] == b""
    assert head[1]["content-length"] == headers["content-length"]
    assert head[1]["content-encoding"] == "gzip"
    assert summary["served"] == 3 and summary["missed"] == 0


async def test_codings_aiohttp_leaves_alone_are_recorded_decoded_or_refused_by_name(
    recording: Recorder, tmp_path: Path
) -> None:
    """aiohttp decodes a single gzip, deflate, br or zstd: "gzip, gzip" and "x-gzip" came
    through the recorder still gzipped, the browser got gzip bytes as its page, and replay sent
    them again under the header. An unknown coding is not recorded, and the 502 names it."""
    page = _page(2_000)
    bodies = {
        "/twice": ("gzip, gzip", gzip.compress(gzip.compress(page))),
        "/x": ("x-gzip", gzip.compress(page)),
        "/old": ("compress", b"\x1f\x9d\x90"),
    }

    async def coded(request: web.Request) -> web.Response:
        coding, body = bodies[request.path]
        return web.Response(body=body, headers={"Content-Encoding": coding})

    runner, origin_port = await _origin([web.get(path, coded) for path in bodies])
    out = tmp_path / "site.har"
    got = {}
    try:
        recorder, port = await recording(out)
        async with aiohttp.ClientSession() as http:
            for path in bodies:
                async with http.get(
                    f"http://127.0.0.1:{origin_port}{path}", proxy=f"http://127.0.0.1:{port}"
                ) as r:
                    got[path] = (r.status, await r.read())
        await recorded(recorder, out)
    finally:
        await runner.cleanup()
    assert got["/twice"] == (200, page) and got["/x"] == (200, page)
    assert got["/old"][0] == 502 and b"'compress'" in got["/old"][1]
    entries = json.loads(out.read_text())["log"]["entries"]
    assert sorted(e["request"]["url"].rsplit("/", 1)[1] for e in entries) == ["twice", "x"]
    for e in entries:  # replayed as site.test
        e["request"]["url"] = "http://site.test/" + e["request"]["url"].rsplit("/", 1)[1]
    out.write_text(json.dumps({"log": {"entries": entries}}))
    server = ReplayProcess(out, PROFILES["none"])
    await server.start()
    try:
        twice = await _raw_get(server.port, "/twice", "gzip")
        x = await _raw_get(server.port, "/x", "gzip")
    finally:
        await server.stop()
    assert twice[1]["content-encoding"] == "gzip, gzip"
    assert gzip.decompress(gzip.decompress(twice[2])) == page
    assert x[1]["content-encoding"] == "gzip" and gzip.decompress(x[2]) == page


async def test_a_second_recorder_of_the_same_archive_is_refused_and_a_killed_one_leaves_no_block(
    origin: tuple[Origin, int], recording: Recorder, tmp_path: Path
) -> None:
    """Two `--overwrite` recordings of one archive both said they had written it; only the
    last one's entries were in it."""
    _, port = origin
    out = tmp_path / "site.har"
    first, first_port = await recording(out, "--overwrite")
    second = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "labd", "replay", "record", str(out), "--port=0", "--overwrite",
        stdout=PIPE, stderr=PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(second.communicate(), 30)
    assert second.returncode == 2
    assert err.decode().strip() == (
        f"{out}: another labd replay record is recording it (it holds {out}.partial)"
    )
    async with aiohttp.ClientSession() as http:
        page = f"http://127.0.0.1:{port}/page"
        async with http.get(page, proxy=f"http://127.0.0.1:{first_port}") as r:
            assert r.status == 200
    assert await recorded(first, out) == [page]
    assert not list(tmp_path.glob("*.partial"))
    # A recorder killed outright leaves its empty .partial: the next one takes it over.
    killed, _ = await recording(out, "--overwrite")
    killed.kill()
    await killed.wait()
    assert (tmp_path / "site.har.partial").read_bytes() == b""
    again, again_port = await recording(out, "--overwrite")
    async with (
        aiohttp.ClientSession() as http,
        http.get(page, proxy=f"http://127.0.0.1:{again_port}") as r,
    ):
        assert r.status == 200
    assert await recorded(again, out) == [page]
    assert not list(tmp_path.glob("*.partial"))


async def test_responses_without_a_body_are_recorded_and_identity_stays_identity(
    recording: Recorder, tmp_path: Path
) -> None:
    """A 204, a 304 and a HEAD were each a 500 from the recorder (and missing from its count of
    failures); a client that asked for no coding had gzip asked for in its name."""
    asked: list[str | None] = []

    async def page(request: web.Request) -> web.Response:
        asked.append(request.headers.get("Accept-Encoding"))
        if request.headers.get("If-None-Match") == '"v1"':
            return web.Response(status=304, headers={"ETag": '"v1"'})
        return web.Response(text="hello", headers={"ETag": '"v1"'})

    async def nothing(request: web.Request) -> web.Response:
        return web.Response(status=204)

    runner, origin_port = await _origin([web.get("/page", page), web.post("/beacon", nothing)])
    out = tmp_path / "site.har"
    site, got = f"http://127.0.0.1:{origin_port}", []
    try:
        recorder, port = await recording(out)
        proxy = f"http://127.0.0.1:{port}"
        async with aiohttp.ClientSession(skip_auto_headers=["Accept-Encoding"]) as http:
            for method, path, headers in [
                ("GET", "/page", {}),
                ("GET", "/page", {"If-None-Match": '"v1"'}),
                ("HEAD", "/page", {}),
                ("POST", "/beacon", {}),
            ]:
                async with http.request(method, site + path, headers=headers, proxy=proxy) as r:
                    got.append((r.status, await r.read()))
        recorder.send_signal(signal.SIGINT)
        stdout, _ = await asyncio.wait_for(recorder.communicate(), 30)
    finally:
        await runner.cleanup()
    assert got == [(200, b"hello"), (304, b""), (200, b""), (204, b"")]
    assert asked == [None, None, None]  # the client asked for identity; so did the recorder
    summary = json.loads(stdout.splitlines()[-1])
    assert summary["recorded"] == 4 and summary["failed"] == 0
    entries = json.loads(out.read_text())["log"]["entries"]
    recorded_as = [(e["request"]["method"], e["response"]["status"]) for e in entries]
    assert recorded_as == [("GET", 200), ("GET", 304), ("HEAD", 200), ("POST", 204)]
    assert all(e["response"]["bodySize"] == 0 for e in entries[1:])


# Raw answers, as origins send them: framing that describes a body not sent, and codings.
BODILESS = {
    "/file": b"200 OK\r\nContent-Type: application/zip\r\nContent-Length: 12345",
    "/zipped": b"200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 777",
    "/old": b"200 OK\r\nContent-Encoding: compress\r\nContent-Length: 50",
    "/beacon-br": b"204 No Content\r\nContent-Encoding: br",
    "/beacon-old": b"204 No Content\r\nContent-Encoding: compress",
    "/moved": b"301 Moved Permanently\r\nLocation: /file\r\nContent-Length: 0",
    "/bad": b"204 No Content\r\nContent-Length: 5\r\n\r\nhello",  # a 204 has no body
}


async def test_a_heads_length_and_bodiless_answers_under_any_coding_are_kept(
    recording: Recorder, tmp_path: Path
) -> None:
    """A HEAD's Content-Length was dropped from the archive, so replay's HEAD had none; a
    bodiless answer under a coding the recorder could not decode (br without brotli,
    compress) was a 502, though there was nothing to decode; a 301's redirectURL was empty;
    a 204 sent with a body got aiohttp's raw "Bad status line"."""

    page = gzip.compress(_page(20_000), compresslevel=9)  # replay encodes again at 6
    bodies = {"/page": page}

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        method, path = (await reader.readuntil(b"\r\n\r\n")).split()[:2]
        head = BODILESS.get(path.decode(), b"200 OK\r\nContent-Encoding: gzip")
        if path == b"/page":
            head += f"\r\nContent-Length: {len(page)}".encode()
        body = bodies.get(path.decode(), b"") if method == b"GET" else b""
        writer.write(b"HTTP/1.1 " + head + (b"" if b"\r\n\r\n" in head else b"\r\n\r\n") + body)
        await writer.drain()
        writer.close()

    origin = await asyncio.start_server(answer, "127.0.0.1", 0)
    site = f"http://127.0.0.1:{origin.sockets[0].getsockname()[1]}"
    out = tmp_path / "site.har"
    asks = [("HEAD", "/file"), ("HEAD", "/zipped"), ("HEAD", "/old"), ("POST", "/beacon-br"),
            ("POST", "/beacon-old"), ("GET", "/moved"), ("GET", "/bad"), ("HEAD", "/page"),
            ("GET", "/page")]  # fmt: skip
    got = {}
    try:
        recorder, port = await recording(out)
        async with aiohttp.ClientSession(auto_decompress=False) as http:
            for method, path in asks:
                async with http.request(
                    method, site + path, proxy=f"http://127.0.0.1:{port}", allow_redirects=False
                ) as r:
                    got[path] = (r.status, r.headers.get("Content-Length"), await r.text())
        recorder.send_signal(signal.SIGINT)
        stdout, _ = await asyncio.wait_for(recorder.communicate(), 30)
    finally:
        origin.close()
    assert got["/file"] == (200, "12345", "")  # the client is told the length too
    assert got["/beacon-br"][0] == got["/beacon-old"][0] == 204
    assert got["/bad"][0] == 502 and "not valid HTTP/1.1 (Bad status line" in got["/bad"][2]
    assert "hello" in got["/bad"][2]  # what came where a status line belonged
    assert json.loads(stdout.splitlines()[-1])["failed"] == 1  # /bad alone
    entries = {
        (e["request"]["method"], e["request"]["url"].removeprefix(site)): e
        for e in json.loads(out.read_text())["log"]["entries"]
    }
    assert sorted(entries) == sorted(ask for ask in asks if ask[1] != "/bad")
    file_headers = entries["HEAD", "/file"]["response"]["headers"]
    assert {"name": "Content-Length", "value": "12345"} in file_headers
    assert entries["GET", "/moved"]["response"]["redirectURL"] == "/file"

    for e in entries.values():  # replayed as site.test
        e["request"]["url"] = "http://site.test" + e["request"]["url"].removeprefix(site)
    out.write_text(json.dumps({"log": {"entries": list(entries.values())}}))
    server = ReplayProcess(out, PROFILES["none"])
    await server.start()
    try:
        heads = {
            (path, accept): await _raw_get(server.port, path, accept, method="HEAD")
            for path in ("/file", "/zipped", "/old")
            for accept in ("gzip", "")
        }
        beacon = await _raw_get(server.port, "/beacon-br", "br", method="POST")
        page_head = await _raw_get(server.port, "/page", "gzip", method="HEAD")
        page_get = await _raw_get(server.port, "/page", "gzip")
    finally:
        await server.stop()
    file, zipped, plain = heads["/file", ""], heads["/zipped", "gzip"], heads["/zipped", ""]
    assert file[1]["content-length"] == "12345" and file[2] == b""
    assert zipped[1]["content-length"] == "777" and zipped[1]["content-encoding"] == "gzip"
    # Decoded, the length is not known: neither is sent.
    assert "content-length" not in plain[1] and "content-encoding" not in plain[1]
    assert "content-length" not in heads["/old", "gzip"][1]  # replay's GET is not compress
    assert beacon[0] == 204 and beacon[2] == b""
    # Recorded with its GET: the length replay's GET is sent (encoded again), not the origin's.
    assert page_head[1]["content-length"] == page_get[1]["content-length"] == str(len(page_get[2]))
    assert len(page_get[2]) != len(page)
