from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import structlog

from labd.logs import bind_context, configure_logging


def json_lines(err: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in err.splitlines() if line.startswith("{")]


def test_json_lines_carry_bound_job_context(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("info", "json")
    log = structlog.get_logger("labd.test")
    with bind_context(job_id="j-42", device="pixel-1"):
        log.info("iteration done", iteration=3)
    log.info("outside")
    inside, outside = json_lines(capsys.readouterr().err)
    assert inside["job_id"] == "j-42" and inside["device"] == "pixel-1"
    assert {"timestamp", "level", "event", "logger"} <= inside.keys()
    assert inside["logger"] == "labd.test" and inside["level"] == "info"
    assert "job_id" not in outside


def test_secrets_never_reach_the_log(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("info", "json", secrets=["hunter2-secret"])
    log = structlog.get_logger("labd.test")
    log.info("connecting", password="pw1", url="postgresql://u:pw2@db/x")
    log.info("echo of hunter2-secret in text")
    err = capsys.readouterr().err
    for secret in ("pw1", "pw2", "hunter2-secret"):
        assert secret not in err
    assert err.count("**********") == 3


def test_level_filters_lines(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("warning", "json")
    log = structlog.get_logger("labd.test")
    log.info("quiet")
    log.warning("loud")
    assert [line["event"] for line in json_lines(capsys.readouterr().err)] == ["loud"]


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_tracebacks_hold_no_local_variables(capsys: pytest.CaptureFixture[str], fmt: str) -> None:
    """Structured in JSON, plain text at a terminal: never the local variables, which may hold
    secrets (rich's tracebacks, structlog's default at a terminal, showed them, and took
    seconds to render one SQLAlchemy error with the event loop stopped)."""
    configure_logging("info", fmt)
    log = structlog.get_logger("labd.test")
    password = "local-secret-value"
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        log.exception("it failed")
    err = capsys.readouterr().err
    assert password not in err
    if fmt == "json":
        (line,) = json_lines(err)
        assert line["exception"][0]["exc_value"] == "boom"
    else:
        assert "it failed" in err and "Traceback (most recent call last)" in err
        assert "RuntimeError: boom" in err


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_an_exception_quoting_a_secret_is_masked(
    capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    configure_logging("info", fmt, secrets=["hunter2-secret"])
    log = structlog.get_logger("labd.test")
    try:
        raise ConnectionError("postgresql://u:UrlPassw0rd9@db/x refused hunter2-secret")
    except ConnectionError:
        log.exception("cannot reach the store")
    err = capsys.readouterr().err
    assert "refused" in err  # the message is there, its secrets are not
    assert "UrlPassw0rd9" not in err and "hunter2-secret" not in err


@pytest.mark.parametrize("ours", [True, False])
def test_journald_gets_a_priority_on_every_line(tmp_path: Path, ours: bool) -> None:
    """Under systemd (JOURNAL_STREAM naming our stderr) each line starts with <N>, so
    `journalctl -p err` finds the errors; anywhere else lines are left as they are."""
    out = tmp_path / "stderr"
    script = (
        "import structlog; from labd.logs import configure_logging\n"
        "configure_logging('debug', 'json'); log = structlog.get_logger('labd.t')\n"
        "log.debug('d'); log.info('i'); log.warning('w'); log.error('e')\n"
    )
    with out.open("wb") as stderr:
        info = os.fstat(stderr.fileno())
        stream = f"{info.st_dev}:{info.st_ino}" if ours else "1:2"
        env = {**os.environ, "JOURNAL_STREAM": stream}
        subprocess.run([sys.executable, "-c", script], stderr=stderr, env=env, check=True)
    lines = out.read_text().splitlines()
    prefixes = [line[:3] for line in lines]
    if ours:
        assert prefixes == ["<7>", "<6>", "<4>", "<3>"]
        assert json.loads(lines[3][3:])["event"] == "e"
    else:
        assert all(line.startswith("{") for line in lines) and len(lines) == 4


async def test_a_request_aiohttp_cannot_parse_is_one_warning_a_handler_error_stays_an_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A too-long request line was an error with aiohttp's traceback (any client could fill
    `journalctl -p err`); a handler's own exception must stay an error with its traceback."""
    import asyncio

    from aiohttp import web

    from labd.config import HttpSettings
    from labd.daemon.http import SidePort

    configure_logging("info", "json")
    side = SidePort(HttpSettings(port=0, api_host=""), lambda: b"")

    async def broken(_: web.Request) -> web.Response:
        raise RuntimeError("a real server bug")

    side.app.router.add_get("/broken", broken)
    await side.start()
    try:
        for target in ("/metrics?x=" + "a" * 10_000, "/broken"):
            reader, writer = await asyncio.open_connection("127.0.0.1", side.port)
            writer.write(f"GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
            assert (await reader.read()).split(b"\r\n")[0].split(b" ")[1] in (b"400", b"500")
            writer.close()
    finally:
        await side.stop(1)
    bad, bug = [x for x in json_lines(capsys.readouterr().err) if x["logger"] == "aiohttp.server"]
    assert bad["left_out"] == 0
    assert bad["level"] == "warning" and "exception" not in bad
    assert (bad["event"], bad["peer"]) == ("bad HTTP request refused", "127.0.0.1")
    assert str(bad["reason"]).startswith("LineTooLong: ")
    assert bug["level"] == "error" and "a real server bug" in str(bug["exception"])


async def test_bytes_that_are_not_http_are_one_debug_line_without_a_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """aiohttp logs non-HTTP bytes (a scanner, TLS on the plain port) at debug level, as the
    noise of a reachable port; at debug level they are the same one line as a malformed request,
    not a traceback, and at info level nothing."""
    import asyncio

    from labd.config import HttpSettings
    from labd.daemon.http import SidePort

    for level in ("debug", "info"):
        configure_logging(level, "json")
        side = SidePort(HttpSettings(port=0, api_host=""), lambda: b"")
        await side.start()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", side.port)
            writer.write(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 GARBAGE\r\n\r\n")
            assert (await reader.read()).split(b" ")[1] == b"400"
            writer.close()
        finally:
            await side.stop(1)
        lines = [x for x in json_lines(capsys.readouterr().err) if x["logger"] == "aiohttp.server"]
        if level == "info":
            assert lines == []
            continue
        [line] = lines
        assert (line["level"], line["event"]) == ("debug", "bad HTTP request refused")
        assert line["peer"] == "127.0.0.1" and "exception" not in line
        assert line["reason"] == "BadHttpMethod: Received HTTPS traffic on an HTTP port"


async def test_a_flood_of_bad_requests_is_one_line_a_minute(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """500 malformed requests wrote 500 lines: anyone reaching a port could flood the log."""
    import asyncio

    from labd.config import HttpSettings
    from labd.daemon.http import SidePort
    from labd.logs import ClientErrorsQuiet

    configure_logging("info", "json")
    side = SidePort(HttpSettings(port=0, api_host=""), lambda: b"")
    await side.start()

    async def bad_request() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", side.port)
        writer.write(b"GET /" + b"a" * 10_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        assert (await reader.read()).split(b" ")[1] == b"400"
        writer.close()

    try:
        for _ in range(50):
            await bad_request()
        monkeypatch.setattr(ClientErrorsQuiet, "EVERY_S", 0.0)  # a minute on
        await bad_request()
    finally:
        await side.stop(1)
    lines = [x for x in json_lines(capsys.readouterr().err) if x["logger"] == "aiohttp.server"]
    assert [x["left_out"] for x in lines] == [0, 49]


async def test_a_scanner_s_noise_does_not_hide_a_bad_request_s_warning(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Bytes that are not HTTP (debug noise, written at level debug) used the minute's one
    line: an oversized request right after was not said (an operations tester)."""
    import asyncio

    from labd.config import HttpSettings
    from labd.daemon.http import SidePort

    configure_logging("debug", "json")
    side = SidePort(HttpSettings(port=0, api_host=""), lambda: b"")
    await side.start()

    async def send(data: bytes) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", side.port)
        writer.write(data)
        await reader.read()
        writer.close()

    try:
        await send(b"GARBAGE\r\n\r\n")
        await send(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 9000 + b"\r\n\r\n")
    finally:
        await side.stop(1)
    lines = [x for x in json_lines(capsys.readouterr().err) if x["logger"] == "aiohttp.server"]
    assert [x["level"] for x in lines] == ["debug", "warning"]
    assert lines[0]["reason"].startswith("BadHttpMethod")
    assert lines[1]["reason"].startswith("LineTooLong")


def test_a_broker_that_went_away_is_a_warning_not_an_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """paho logs a broker restart at error level, as aiomqtt's `mqtt` logger: a CI tester's
    alert on errors fired at every broker restart, which labd rides out."""
    import logging

    configure_logging("info", "json")
    paho = logging.getLogger("mqtt")  # as paho's _easy_log calls it: a format and arguments
    paho.log(logging.ERROR, "failed to receive on socket: %s", ConnectionResetError(104, "reset"))
    paho.log(logging.ERROR, "something else went wrong: %s", "x")
    lines = [x for x in json_lines(capsys.readouterr().err) if x["logger"] == "mqtt"]
    assert [(x["level"], x["event"][:20]) for x in lines] == [
        ("warning", "failed to receive on"),
        ("error", "something else went "),
    ]
