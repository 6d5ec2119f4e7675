"""The replay server as a job runs it: its own process, real sockets, a real HTTP client."""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from labd.errors import CannotStart
from labd.replay.certs import CA_CERT, write_ca
from labd.replay.har import har_document, har_entry
from labd.replay.process import ReplayProcess
from labd.replay.replaying import MISS_HEADER
from labd.replay.shaping import PROFILES, Profile

WHEN = "2026-01-01T00:00:00+00:00"
HTML = [("Content-Type", "text/html")]
BIG = bytes(range(256)) * 800  # 200 KiB, binary
SMALL = b"s" * 5_000  # an image, say


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    entries = [
        har_entry("GET", "http://site.test/", [], b"", 200, "OK", HTML, b"<h1>page</h1>", WHEN, 1),
        har_entry("GET", "http://site.test/big.bin", [], b"", 200, "OK", [], BIG, WHEN, 1),
        har_entry("GET", "http://site.test/small.bin", [], b"", 200, "OK", [], SMALL, WHEN, 1),
        har_entry("GET", "https://secure.test/app.js", [], b"", 200, "OK", [], b"js();", WHEN, 1),
    ]  # fmt: skip
    path = tmp_path / "site.har"
    path.write_text(json.dumps(har_document(entries, "test")))
    return path


@pytest.fixture
def ca(tmp_path: Path) -> Path:
    write_ca(tmp_path / "ca")
    return tmp_path / "ca"


async def started(archive: Path, profile: Profile, ca: Path | None = None) -> ReplayProcess:
    server = ReplayProcess(archive, profile, ca=ca)
    await server.start()
    return server


@pytest.fixture
async def plain(archive: Path, ca: Path) -> AsyncIterator[ReplayProcess]:
    server = await started(archive, PROFILES["none"], ca)
    yield server
    await server.stop()


async def test_serves_as_proxy_and_origin_over_http_and_https(
    plain: ReplayProcess, ca: Path
) -> None:
    proxy = f"http://127.0.0.1:{plain.port}"
    trust = ssl.create_default_context(cafile=str(ca / CA_CERT))
    async with aiohttp.ClientSession() as http:
        async with http.get("http://site.test/", proxy=proxy) as r:
            assert (r.status, await r.text()) == (200, "<h1>page</h1>")
        async with http.get("http://site.test/big.bin", proxy=proxy) as r:
            assert await r.read() == BIG
            # Recorded without a Content-Type, sent without one (aiohttp's default would say
            # application/octet-stream: a page so typed is downloaded, not shown).
            assert "Content-Type" not in r.headers
        async with http.get("http://site.test/", proxy=proxy) as r:
            assert r.headers["Content-Type"] == "text/html"
        # HTTPS through the proxy: CONNECT, then TLS as secure.test, signed by the replay CA.
        async with http.get("https://secure.test/app.js", proxy=proxy, ssl=trust) as r:
            assert await r.text() == "js();"
        # Origin mode: the Host header names the site (a browser's host rules point here).
        async with http.get(f"http://127.0.0.1:{plain.port}/", headers={"Host": "site.test"}) as r:
            assert await r.text() == "<h1>page</h1>"
        async with http.get(
            f"http://127.0.0.1:{plain.port}/nope", headers={"Host": "site.test"}
        ) as r:
            assert r.status == 404 and r.headers[MISS_HEADER] == "miss"
    summary = await plain.stop()
    assert summary["served"] == 5
    assert summary["misses"] == [{"url": "GET http://site.test/nope", "count": 1}]


async def test_round_trip_latency_is_added_to_every_exchange(archive: Path) -> None:
    server = await started(archive, Profile(latency_ms=150))
    try:
        async with aiohttp.ClientSession() as http:
            url = f"http://127.0.0.1:{server.port}/"
            began = time.perf_counter()
            async with http.get(url, headers={"Host": "site.test"}) as r:  # connect + exchange
                await r.read()
            first = time.perf_counter() - began
            began = time.perf_counter()
            async with http.get(
                url, headers={"Host": "site.test"}
            ) as r:  # kept alive: exchange only
                await r.read()
            second = time.perf_counter() - began
    finally:
        await server.stop()
    assert 0.29 <= first < 0.40
    assert 0.145 <= second < 0.20


async def test_bandwidth_paces_the_body(archive: Path) -> None:
    server = await started(archive, Profile(down_kbps=1600))
    try:
        async with aiohttp.ClientSession() as http:
            began = time.perf_counter()
            async with http.get(
                f"http://127.0.0.1:{server.port}/big.bin", headers={"Host": "site.test"}
            ) as r:
                body = await r.read()
                typed = r.headers.get("Content-Type")
            elapsed = time.perf_counter() - began
    finally:
        await server.stop()
    ideal = len(BIG) * 8 / 1_600_000  # 1.02 s
    assert body == BIG
    assert typed is None  # sent in slices, still as recorded: without a type
    assert ideal * 0.9 <= elapsed <= ideal * 1.25


async def test_a_small_response_costs_its_transfer_time_every_time(archive: Path) -> None:
    """A token bucket's 16 KB burst, refilled during every round trip, let any response under
    about 16 KB through at once on every profile: at 2g a 5 KB image cost no transfer time."""
    server = await started(archive, Profile(down_kbps=280, latency_ms=100))  # 2g's rate
    times = []
    try:
        async with aiohttp.ClientSession() as http:
            for _ in range(3):  # kept alive: each after a round trip of idle link
                began = time.perf_counter()
                url = f"http://127.0.0.1:{server.port}/small.bin"
                async with http.get(url, headers={"Host": "site.test"}) as r:
                    assert await r.read() == SMALL
                times.append(time.perf_counter() - began)
    finally:
        await server.stop()
    transfer = (512 + len(SMALL)) * 8 / 280_000  # headers and body: 157 ms
    for taken in times[1:]:  # one round trip (100 ms) and the transfer
        assert 0.1 + transfer * 0.95 <= taken <= 0.1 + transfer * 1.5, times


async def test_hostile_clients_do_not_stop_the_others(plain: ReplayProcess) -> None:
    port = plain.port
    # A 64 KiB request line gets a clear 400.
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /" + b"a" * 65536 + b" HTTP/1.1\r\nHost: site.test\r\n\r\n")
    await writer.drain()
    status = (await reader.readline()).split()
    assert status[1] == b"400"
    writer.close()
    # Slowloris: many connections sending headers a byte at a time, never finishing.
    idle = [await asyncio.open_connection("127.0.0.1", port) for _ in range(200)]
    for _, w in idle:
        w.write(b"GET / HTTP/1.1\r\nHo")
    # A client that leaves in the middle of a large body.
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /big.bin HTTP/1.1\r\nHost: site.test\r\n\r\n")
    await reader.read(1000)
    writer.transport.abort()
    async with aiohttp.ClientSession() as http:
        began = time.perf_counter()
        async with http.get(f"http://127.0.0.1:{port}/", headers={"Host": "site.test"}) as r:
            assert await r.text() == "<h1>page</h1>"
        assert time.perf_counter() - began < 0.5
    for _, w in idle:
        w.close()


async def test_a_broken_archive_fails_the_job_not_the_device(tmp_path: Path) -> None:
    """A truncated or 100,000-deep archive is the job's own failure (CannotStart), named; the
    deep one was a RecursionError reported as an infrastructure failure, which quarantined
    the device after three attempts."""
    broken = tmp_path / "broken.har"
    broken.write_text('{"log": {"entries": [')
    with pytest.raises(CannotStart, match=r"broken.har: not JSON .* truncated\?"):
        await started(broken, PROFILES["none"])
    deep = tmp_path / "deep.har"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(CannotStart, match=r"deep.har: arrays and objects nested more than 64"):
        await started(deep, PROFILES["none"])


async def test_headers_http_cannot_carry_are_skipped_and_the_rest_served(tmp_path: Path) -> None:
    # They were loaded, and a request for their entry got an empty reply and a traceback.
    bad = [("X-Split", "a\r\nSet-Cookie: evil=1"), ("X-Nul", "a\x00b"), ("Bad Name:", "v")]
    entries = [
        har_entry("GET", "http://site.test/", [], b"", 200, "OK", HTML + bad, b"page", WHEN, 1),
        har_entry("GET", "http://site.test/ok", [], b"", 200, "OK", HTML, b"fine", WHEN, 1),
    ]  # fmt: skip
    path = tmp_path / "bad-headers.har"
    path.write_text(json.dumps(har_document(entries, "test")))
    server = await started(path, PROFILES["none"])
    try:
        assert len(server.ready["skipped"]) == 3
        assert all(
            line.startswith("entries[0]: response.headers[") for line in server.ready["skipped"]
        )
        proxy = f"http://127.0.0.1:{server.port}"
        async with aiohttp.ClientSession() as http:
            for url, body in (("http://site.test/", "page"), ("http://site.test/ok", "fine")):
                async with http.get(url, proxy=proxy) as r:
                    assert (r.status, await r.text()) == (200, body)
                    assert "Set-Cookie" not in r.headers and "X-Nul" not in r.headers
    finally:
        summary = await server.stop()
    assert summary["served"] == 2 and summary["client_errors"] == 0


async def test_connect_to_a_host_no_certificate_can_name_is_refused(
    plain: ReplayProcess, ca: Path
) -> None:
    """An empty or non-IDNA host was answered "200 Connection Established", then the
    certificate raised ValueError and the client hung; a Unicode name is IDNA-encoded."""
    from structlog.testing import capture_logs

    # Later: a wildcard, and labels a host name cannot have, got a 200 and a certificate;
    # each refusal was a log line of its own.
    with capture_logs() as said:
        for host in (
            b"",
            b"a" * 64 + b".test",
            b"\xff.test",
            b"*.test",
            b"-bad-.test",
            b"xn--zz--.com",
            b"site.test:99999",
            b"site.test:0",
            b"exa mple.test:443",
        ):
            reader, writer = await asyncio.open_connection("127.0.0.1", plain.port)
            target = host if b":" in host else host + b":443"
            writer.write(b"CONNECT " + target + b" HTTP/1.1\r\n\r\n")
            answer = await asyncio.wait_for(reader.read(), 2)
            assert answer.split()[1] == b"400", host
            assert answer.endswith(b"\n") and b"CONNECT" in answer  # the body says why
            writer.close()
        await asyncio.sleep(0.5)
    assert [e["event"] for e in said if "connect_refused" in e["event"]] == [
        "replay server: connect_refused"
    ]
    reader, writer = await asyncio.open_connection("127.0.0.1", plain.port)
    writer.write("CONNECT bücher.test:443 HTTP/1.1\r\n\r\n".encode())
    assert (await asyncio.wait_for(reader.readline(), 2)).split()[1] == b"200"
    await reader.readline()
    trust = ssl.create_default_context(cafile=str(ca / CA_CERT))
    await asyncio.wait_for(writer.start_tls(trust, server_hostname="xn--bcher-kva.test"), 5)
    writer.write(b"GET / HTTP/1.1\r\nHost: xn--bcher-kva.test\r\nConnection: close\r\n\r\n")
    assert (await asyncio.wait_for(reader.readline(), 2)).split()[1] == b"404"  # a miss, served
    writer.close()


async def test_long_urls_are_served_and_a_flood_of_bad_requests_neither_stalls_nor_floods(
    plain: ReplayProcess,
) -> None:
    """A 10 KB URL (a tracking pixel's) got aiohttp's 400 at 8 KiB, so such pages could not be
    recorded; 2,000 malformed requests wrote a traceback each, and the per-job server's log
    went to a pipe nobody read, which stalls a server once it fills."""
    from structlog.testing import capture_logs

    port = plain.port
    with capture_logs() as logs:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /?q=" + b"x" * 10_000 + b" HTTP/1.1\r\nHost: site.test\r\n\r\n")
        assert (await reader.readline()).split()[1] == b"404"  # a miss, not a refusal
        writer.close()
        for _ in range(2_000):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET / HTTP/1.1\r\nHost: site.test\r\nBad Header\r\n\r\n")
            assert (await reader.readline()).split()[1] == b"400"
            writer.close()
        url, host = f"http://127.0.0.1:{port}/", {"Host": "site.test"}
        async with aiohttp.ClientSession() as http, http.get(url, headers=host) as r:
            assert r.status == 200
        await asyncio.sleep(0.5)
    refused = [e for e in logs if e["event"] == "replay server: bad HTTP request refused"]
    assert len(refused) == 1 and refused[0]["log_level"] == "warning", refused
