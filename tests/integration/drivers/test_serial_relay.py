"""The serial relay, against a relay simulator on a real pseudo-terminal and pyserial's loop://."""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest

from labd.errors import ConfigError, InfrastructureError
from labd.pool import load_power
from labd_serial_relay import SerialRelay
from labd_serial_relay.relay import RelayOptions

LCUS_ON, LCUS_OFF = "A0 01 01 A2", "A0 01 00 A1"


class RelaySimulator:
    """The board's side of the line: reads 4-byte LCUS frames, switches, echoes each one
    (`echo_after_s` after it came: a board that answers late), or answers `garbage`."""

    def __init__(self, echo_after_s: float = 0.0) -> None:
        self.master, slave = os.openpty()
        self.port = os.ttyname(slave)
        self._slave = slave
        self.states: list[bool] = []
        self.echo_after_s = echo_after_s
        self.garbage: bytes | None = None
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        buffer = b""
        while True:
            try:
                buffer += os.read(self.master, 64)
            except OSError:
                return
            while len(buffer) >= 4:
                frame, buffer = buffer[:4], buffer[4:]
                start, channel, state, checksum = frame
                if start == 0xA0 and checksum == (start + channel + state) & 0xFF:
                    self.states.append(bool(state))
                    if self.echo_after_s:
                        threading.Timer(self.echo_after_s, self._echo, (frame,)).start()
                    else:
                        self._echo(frame)

    def _echo(self, frame: bytes) -> None:
        if not self._closed.is_set():
            os.write(self.master, self.garbage or frame)

    def close(self) -> None:
        self._closed.set()
        os.close(self._slave)
        os.close(self.master)


@pytest.fixture
def board() -> Any:
    sim = RelaySimulator()
    yield sim
    sim.close()


def relay(port: str, **kw: Any) -> SerialRelay:
    return SerialRelay(RelayOptions(port=port, on=LCUS_ON, off=LCUS_OFF, settle_s=0, **kw))


async def test_on_off_and_cycle_reach_the_board(board: RelaySimulator) -> None:
    r = relay(board.port, verify_echo=True)
    await r.on()
    await r.off()
    await r.cycle(off_seconds=0.01)
    assert board.states == [True, False, False, True]


async def test_loop_url_echo_is_verified() -> None:
    await relay("loop://", verify_echo=True).on()


async def test_a_board_that_does_not_answer_is_an_infrastructure_error(
    board: RelaySimulator,
) -> None:
    silent = SerialRelay(
        RelayOptions(port=board.port, on="FF FF", off=LCUS_OFF, verify_echo=True, timeout_s=0.2)
    )
    with pytest.raises(InfrastructureError, match="answered ''"):
        await silent.on()


async def test_a_missing_port_is_an_infrastructure_error() -> None:
    with pytest.raises(InfrastructureError, match="/dev/no-such-relay"):
        await relay("/dev/no-such-relay").on()


def test_configuration_errors_name_the_key() -> None:
    with pytest.raises(ConfigError) as caught:
        load_power(
            {"pixel": {"kind": "serial-relay", "port": "/dev/x", "on": "zz", "off": "A0"}},
            "labd.toml",
        )
    assert caught.value.problems == [
        "labd.toml: pool.power.pixel.on: value error, not hex bytes like 'A0 01 01 A2', got 'zz'"
    ]
    with pytest.raises(ConfigError) as caught:
        load_power({"pixel": {"kind": "serial-relai"}}, "labd.toml")
    assert caught.value.problems == [
        "labd.toml: pool.power.pixel.kind: unknown power control 'serial-relai' "
        "(did you mean 'serial-relay'?)"
    ]
    loaded = load_power(
        {"pixel": {"kind": "serial-relay", "port": "loop://", "on": "01", "off": "00"}}, "x"
    )
    assert isinstance(loaded["pixel"], SerialRelay)
