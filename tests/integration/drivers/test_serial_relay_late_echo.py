"""The serial relay's echo check against a board that answers late, on a real pseudo-terminal:
a stale echo of an earlier command never confirms a later one."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import serial

from labd.errors import InfrastructureError
from labd_serial_relay import SerialRelay
from labd_serial_relay.relay import RelayOptions
from tests.integration.drivers.test_serial_relay import RelaySimulator

LCUS_ON, LCUS_OFF = "A0 01 01 A2", "A0 01 00 A1"
LATE_S = 0.5  # the board's echo comes this long after each command


@pytest.fixture
def late_board() -> Iterator[RelaySimulator]:
    board = RelaySimulator(echo_after_s=LATE_S)
    yield board
    board.close()


def relay(port: str, timeout_s: float) -> SerialRelay:
    options = RelayOptions(
        port=port, on=LCUS_ON, off=LCUS_OFF, settle_s=0, verify_echo=True, timeout_s=timeout_s
    )
    return SerialRelay(options)


async def test_a_late_echo_of_an_earlier_command_never_confirms_a_later_one(
    late_board: RelaySimulator,
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


@pytest.fixture
def board() -> Iterator[RelaySimulator]:
    board = RelaySimulator()
    yield board
    board.close()


async def test_a_board_that_answered_wrongly_owes_nothing(board: RelaySimulator) -> None:
    """A wrong answer in full is not an echo still to come: the next command went out at once
    (it waited up to LATE_ECHOES time-outs, 20 s, holding the port from every channel)."""
    board.garbage = bytes.fromhex("de ad be ef")
    with pytest.raises(InfrastructureError, match="answered 'de ad be ef'"):
        await relay(board.port, timeout_s=2).on()
    board.garbage = None
    began = time.monotonic()
    await relay(board.port, timeout_s=2).off()
    assert time.monotonic() - began < 1.5 and board.states == [True, False]


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
