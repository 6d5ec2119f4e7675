"""The serial relay's echo check against a board that answers late, on a real pseudo-terminal:
a stale echo of an earlier command never confirms a later one."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator

import pytest
import serial

from labd.errors import InfrastructureError
from labd_serial_relay import SerialRelay
from labd_serial_relay.relay import RelayOptions

LCUS_ON, LCUS_OFF = "A0 01 01 A2", "A0 01 00 A1"
LATE_S = 0.5  # the board's echo comes this long after each command


class LateBoard:
    """An LCUS board that echoes each 4-byte frame LATE_S seconds after it came."""

    def __init__(self) -> None:
        self.master, self._slave = os.openpty()
        self.port = os.ttyname(self._slave)
        self._closed = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        buffer = b""
        while True:
            try:
                buffer += os.read(self.master, 64)
            except OSError:
                return
            while len(buffer) >= 4:
                frame, buffer = buffer[:4], buffer[4:]
                threading.Timer(LATE_S, self._echo, (frame,)).start()

    def _echo(self, frame: bytes) -> None:
        if not self._closed.is_set():
            os.write(self.master, frame)

    def close(self) -> None:
        self._closed.set()
        os.close(self._slave)
        os.close(self.master)


@pytest.fixture
def late_board() -> Iterator[LateBoard]:
    board = LateBoard()
    yield board
    board.close()


def relay(port: str, timeout_s: float) -> SerialRelay:
    options = RelayOptions(
        port=port, on=LCUS_ON, off=LCUS_OFF, settle_s=0, verify_echo=True, timeout_s=timeout_s
    )
    return SerialRelay(options)


async def test_a_late_echo_of_an_earlier_command_never_confirms_a_later_one(
    late_board: LateBoard,
) -> None:
    """off, on and off again, each given 0.2 s by a board answering after 0.5 s: all three
    fail (the old code passed the second off on the first off's echo), and a relay given
    time enough then passes on its own echo."""
    hasty = relay(late_board.port, timeout_s=0.2)
    for command in (hasty.off, hasty.on, hasty.off):
        with pytest.raises(InfrastructureError, match="answered"):
            await command()
    patient = relay(late_board.port, timeout_s=2)  # another channel's view of the same port
    began = time.monotonic()
    await patient.on()
    await patient.off()
    assert time.monotonic() - began < 5


async def test_pending_input_is_discarded_before_a_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Bytes waiting before the command (an "on" frame in pyserial's loop://, which does not
    flush when opened) are not its echo."""
    line = serial.serial_for_url("loop://", timeout=0.2)
    line.write(bytes.fromhex(LCUS_ON))  # a stale echo, waiting to be read
    monkeypatch.setattr(line, "write", len)  # a board that stays silent this time
    monkeypatch.setattr(serial, "serial_for_url", lambda *args, **kwargs: line)
    with pytest.raises(InfrastructureError, match="answered ''"):
        await relay("loop://", timeout_s=0.2).on()
