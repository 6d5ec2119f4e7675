"""The browser's profile belongs to the job's account: the files labd reads there (the port
the browser listens on) are read as small regular files only. A job that made
DevToolsActivePort a named pipe froze labd's event loop, every API and MQTT answer with it,
until someone wrote to the pipe."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from labd_browser.devtools import read_page


@pytest.mark.parametrize("made", ["fifo", "link", "huge"])
async def test_a_profile_file_the_job_tampered_with_costs_only_the_marks(
    tmp_path: Path, made: str
) -> None:
    port_file = tmp_path / "DevToolsActivePort"
    if made == "fifo":
        os.mkfifo(port_file)
    elif made == "link":
        port_file.symlink_to("/dev/zero")
    else:
        port_file.write_text("9222\n" + "x" * 10**6)
    async with asyncio.timeout(5):  # a FIFO had blocked for ever
        assert await read_page("chromium", tmp_path, answer_s=1) is None


async def test_firefox_is_reached_on_loopback_only(tmp_path: Path) -> None:
    """labd connects where WebDriverBiDiServer.json says: a job's file naming another address
    made labd (root) connect there."""
    reached: list[bool] = []

    async def note(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        reached.append(True)
        writer.close()

    elsewhere = await asyncio.start_server(note, "127.0.0.2", 0)  # not the browser's address
    port = elsewhere.sockets[0].getsockname()[1]
    server = {"ws_host": "127.0.0.2", "ws_port": port}
    (tmp_path / "WebDriverBiDiServer.json").write_text(json.dumps(server))
    async with asyncio.timeout(5):
        assert await read_page("firefox", tmp_path, answer_s=1) is None
    elsewhere.close()
    assert reached == []
