"""Characters a keyboard map lacks, typed on Xvfb: how many arrive right.

600 CJK characters (more than Xvfb's 19 spare keycodes many times over) typed through labd's X11
input into Chromium's textarea, read back through Chrome's DevTools protocol, and into an Xlib
client (tests/xrecorder.py: python-xlib, which fetches a new keyboard map when it reads the
change, as Tk does); without and with a delay between characters, on an idle host and with a
busy loop on every CPU and one more (a loaded lab host, where clients apply a new map late).
Target: every character right.

Run: python benchmarks/x11_unicode_typing_bench.py   (needs Xvfb and Chromium)
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).parents[1]))

from labd_x11 import X11Input
from labd_x11.driver import start_xvfb

COUNT = 600
PORT = 19333
TEXT = "".join(chr(0x4E00 + (i * 37) % 20000) for i in range(COUNT))
PAGE = "<textarea autofocus id=t style='width:100%;height:90%'></textarea>"


async def textarea_value() -> str:
    async with aiohttp.ClientSession() as session:
        pages = await (await session.get(f"http://127.0.0.1:{PORT}/json")).json()
        page = next(p for p in pages if p["type"] == "page")
        async with session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            expression = "document.getElementById('t').value"
            params = {"expression": expression, "returnByValue": True}
            await ws.send_json({"id": 1, "method": "Runtime.evaluate", "params": params})
            while True:
                answer = await ws.receive_json()
                if answer.get("id") == 1:
                    return str(answer["result"]["result"]["value"])


def wrong(got: str) -> int:
    """Characters of TEXT that did not arrive as typed (missing or extra ones included)."""
    return sum(a != b for a, b in zip(got, TEXT, strict=False)) + abs(len(got) - len(TEXT))


def busy() -> None:
    while True:
        pass


def run(display: str, delay_ms: float) -> tuple[float, int]:
    """(seconds typing, characters wrong) in a fresh Chromium."""
    profile = tempfile.mkdtemp()
    browser = shutil.which("chromium") or shutil.which("google-chrome") or "chromium"
    chromium = subprocess.Popen(
        [browser, "--no-sandbox", f"--user-data-dir={profile}", "--no-first-run",
         f"--remote-debugging-port={PORT}", "--window-size=1280,800",
         "data:text/html;charset=utf-8," + urllib.parse.quote(PAGE)],
        env={**os.environ, "DISPLAY": display, "HOME": profile},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        time.sleep(6)  # the window up, the textarea focused
        x11 = X11Input(display)
        began = time.monotonic()
        x11.text(TEXT, delay_ms)
        took = time.monotonic() - began
        x11.close()
        time.sleep(2)
        got = asyncio.run(textarea_value())
        for i, (want, have) in enumerate(zip(TEXT, got, strict=False)):
            if want != have:  # an earlier character: the key read with the map before
                where = "earlier" if have in TEXT[:i] else "later" if have in TEXT[i:] else "?"
                print(f"  at {i}: {want} arrived as {have} ({where} in the text)", file=sys.stderr)
        return took, wrong(got)
    finally:
        chromium.kill()
        chromium.wait()
        shutil.rmtree(profile, ignore_errors=True)


def run_xlib(display: str, delay_ms: float) -> tuple[float, int]:
    """(seconds typing, characters wrong) into the recording X client."""
    recorder = subprocess.Popen(
        [sys.executable, "-m", "tests.xrecorder", display], stdout=subprocess.PIPE, text=True
    )
    try:
        assert recorder.stdout is not None
        recorder.stdout.readline()  # it has the focus
        x11 = X11Input(display)
        began = time.monotonic()
        x11.text(TEXT, delay_ms)
        took = time.monotonic() - began
        x11.key("F12")
        x11.close()
        got = ""
        for line in recorder.stdout:
            event = json.loads(line)
            if event.get("name") == "F12":
                break
            if event.get("type") == "key":
                got += event.get("char") or ""
        return took, wrong(got)
    finally:
        recorder.kill()
        recorder.wait()


def main() -> None:
    xvfb, display = start_xvfb("1280x800")
    print(f"{COUNT} CJK characters typed on Xvfb")
    print(f"{'client':<10} {'host':<8} {'delay_ms':>8} {'typed in':>9} {'wrong':>6}")
    try:
        for loaded in [False, True] * int(os.environ.get("ROUNDS", "1")):
            workers = [multiprocessing.Process(target=busy, daemon=True)
                       for _ in range((os.cpu_count() or 1) + 1 if loaded else 0)]  # fmt: skip
            for worker in workers:
                worker.start()
            for client, typing in (("chromium", run), ("xlib", run_xlib)):
                for delay_ms in (0, 5):
                    took, wrong = typing(display, delay_ms)
                    host = "loaded" if loaded else "idle"
                    print(f"{client:<10} {host:<8} {delay_ms:>8} {took:>8.1f}s {wrong:>6}",
                          flush=True)  # fmt: skip
            for worker in workers:
                worker.kill()
    finally:
        xvfb.kill()


if __name__ == "__main__":
    main()
