from __future__ import annotations

import os
import socket
from pathlib import Path

from labd.daemon.systemd import SystemdNotifier


def test_notifications_arrive_on_the_notify_socket(tmp_path: Path) -> None:
    address = str(tmp_path / "notify")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    server.bind(address)
    server.settimeout(2)
    notifier = SystemdNotifier({"NOTIFY_SOCKET": address})
    notifier.ready("serving")
    notifier.watchdog()
    notifier.stopping("bye")
    received = [server.recv(4096).decode() for _ in range(3)]
    assert received[0].split("\n") == ["READY=1", "STATUS=serving", f"MAINPID={os.getpid()}"]
    assert received[1] == "WATCHDOG=1"
    assert received[2] == "STOPPING=1\nSTATUS=bye"
    notifier.close()
    server.close()


def test_without_notify_socket_everything_is_a_no_op() -> None:
    notifier = SystemdNotifier({})
    assert not notifier.enabled
    notifier.ready("x")  # must not raise


def test_watchdog_interval_is_half_of_watchdog_usec_for_this_process() -> None:
    assert SystemdNotifier({"WATCHDOG_USEC": "3000000"}).watchdog_interval == 1.5
    mine = {"WATCHDOG_USEC": "3000000", "WATCHDOG_PID": str(os.getpid())}
    assert SystemdNotifier(mine).watchdog_interval == 1.5
    other = {"WATCHDOG_USEC": "3000000", "WATCHDOG_PID": "1"}
    assert SystemdNotifier(other).watchdog_interval is None


def test_a_non_positive_watchdog_usec_is_ignored_like_a_malformed_one() -> None:
    for value in ("0", "-5", "-1000000", "abc"):
        assert SystemdNotifier({"WATCHDOG_USEC": value}).watchdog_interval is None, value


def test_the_watchdog_is_never_pinged_more_often_than_every_tenth_of_a_second() -> None:
    for value in ("1", "2", "199999"):
        assert SystemdNotifier({"WATCHDOG_USEC": value}).watchdog_interval == 0.1, value
    assert SystemdNotifier({"WATCHDOG_USEC": "200002"}).watchdog_interval == 0.100001
