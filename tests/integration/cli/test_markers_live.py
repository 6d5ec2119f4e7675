"""`labd markers --serial` against a slow logcat from the adb stand-in (the adb host protocol
on loopback): iterations print as their lines arrive, and Ctrl-C prints what was found."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from subprocess import PIPE

import pytest

from tests.adb_standin import AdbStandIn, FakeDevice, unread_bytes
from tests.markers_log import threadtime_iteration


@pytest.fixture
def adb() -> Iterator[AdbStandIn]:
    server = AdbStandIn()
    yield server
    server.close()


def _until(condition: object, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return
        time.sleep(0.02)
    raise AssertionError(f"waited {seconds:g} s for {what}")


def _read_all_sent(device: FakeDevice) -> bool:
    """The stand-in has sent every line emitted so far (emit only queues them), and the CLI has
    read them all (its socket's queue is empty)."""
    return (
        bool(device.logcat_readers)
        and device.logcat_sent == len(device.logcat)
        and unread_bytes(device.logcat_readers[0]) == 0
    )


def test_iterations_print_as_lines_arrive_and_ctrl_c_keeps_the_open_one(
    adb: AdbStandIn,
) -> None:
    device = adb.add(FakeDevice("emulator-5554"))
    env = {**os.environ, "ANDROID_ADB_SERVER_PORT": str(adb.port), "PYTHONUNBUFFERED": "1"}
    cli = subprocess.Popen(
        [sys.executable, "-m", "labd", "markers", "--serial", "emulator-5554"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    printed: list[str] = []
    assert cli.stdout is not None
    reader = threading.Thread(target=lambda: printed.extend(cli.stdout), daemon=True)
    reader.start()
    try:
        first = threadtime_iteration(1434771804212)
        for line in first:  # a slow stream: one line at a time, a few hundred bytes in all
            device.emit(line)
            time.sleep(0.05)
        _until(lambda: any("iteration 0" in line for line in printed), 20, "iteration 0")
        assert cli.poll() is None  # printed while the log is still open, not at its end
        assert sum(len(line) + 1 for line in first) < 2048
        assert "(complete)" in printed[0]
        second = threadtime_iteration(1434771904212)[:3]  # appLaunch and two marks
        device.emit(*second)
        _until(lambda: _read_all_sent(device), 20, "the CLI to read the second launch")
        cli.send_signal(signal.SIGINT)
        # Not communicate(): it would read stdout too, racing the reader for the last lines.
        cli.wait(timeout=20)
        assert cli.stderr is not None
        stderr = cli.stderr.read()
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
    reader.join(5)
    text = "".join(printed)
    assert cli.returncode == 0, stderr
    assert "iteration 1 clock.gaiamobile.org (INCOMPLETE)" in text
    assert "coldlaunch.navigationInteractive" in text.split("iteration 1")[1]
    assert "interrupted (Ctrl-C) before fullyLoaded" in text
    summary = (
        "labd markers: 2 iterations from 9 lines; 0 marks without a launch; 0 unreadable marks"
        " outside a launch (a garbled epoch or field) (interrupted)"
    )
    assert summary in stderr
    assert "Traceback" not in stderr


def test_an_unknown_serial_is_named(adb: AdbStandIn) -> None:
    env = {**os.environ, "ANDROID_ADB_SERVER_PORT": str(adb.port)}
    done = subprocess.run(
        [sys.executable, "-m", "labd", "markers", "--serial", "no-such-phone"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert done.returncode != 0
    assert "no-such-phone" in done.stderr and "Traceback" not in done.stderr


def test_a_silent_adb_server_ends_markers_and_capture_with_its_name(
    adb: AdbStandIn, tmp_path: Path
) -> None:
    """An adb server that takes the connection and never answers hung both commands for good
    (adbutils' default client has no time-out); they now end in ADB_TIMEOUT_S naming it."""
    adb.garbled = b""  # accepts, never answers
    env = {**os.environ, "ANDROID_ADB_SERVER_PORT": str(adb.port)}
    video = str(tmp_path / "v.mp4")
    commands = (
        ["markers", "--serial", "emulator-5554"],
        ["capture", "--adb", "emulator-5554", "-o", video],
    )
    began = time.monotonic()
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", "labd", *argv], env=env, text=True, stdout=PIPE, stderr=PIPE
        )
        for argv in commands
    ]
    outputs = [run.communicate(timeout=60) for run in runs]  # side by side: 10 s, not 20
    assert time.monotonic() - began < 40
    for run, (_, stderr) in zip(runs, outputs, strict=True):
        assert run.returncode == 3, stderr
        assert stderr == (
            f"labd: device emulator-5554: the adb server at 127.0.0.1:{adb.port} "
            "did not answer within 10 s\n"
        )


def test_every_app_still_launching_when_the_log_ends_is_reported(tmp_path: Path) -> None:
    """Two apps launching at once, neither done by the end: the CLI printed only the first."""
    from tests.markers_log import brief_iteration

    log = tmp_path / "two.log"
    one = brief_iteration(1_700_000_000_000, app="one.example.org")[:-2]  # before fullyLoaded
    two = brief_iteration(1_700_000_000_050, pid=7000, app="two.example.org")[:-2]
    log.write_text("\n".join(line for pair in zip(one, two, strict=True) for line in pair) + "\n")
    done = subprocess.run(
        [sys.executable, "-m", "labd", "markers", "--file", str(log), "--json"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    import json

    shown = [json.loads(line) for line in done.stdout.splitlines()]
    assert [it["app"] for it in shown] == ["one.example.org", "two.example.org"]
    assert all("the log ends before fullyLoaded" in it["problems"] for it in shown)
    assert "2 iterations from" in done.stderr
