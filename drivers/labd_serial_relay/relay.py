"""One relay channel behind a serial port. pyserial blocks, so it runs in a worker thread;
channels of one board share the port, so commands to a port take turns.

An echo is the command's own bytes, so a late echo of an earlier command looks like the
answer to a later one: before each command the port's pending input is discarded, and after a
command whose echo did not come, the next command on the port first waits for that echo (up to
LATE_ECHOES time-outs after it was sent, when it is given up for lost) and discards it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import defaultdict
from dataclasses import dataclass

import serial
from pydantic import BaseModel, ConfigDict, Field, field_validator

from labd.sdk import InfrastructureError, PowerControl

LATE_ECHOES = 10  # time-outs after its command that a missing echo may still arrive


@dataclass
class _Owed:
    """Echo bytes of a port's earlier commands that have not come yet."""

    count: int = 0
    until: float = 0.0  # monotonic: given up for lost then


_port_locks: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)
_owed: defaultdict[str, _Owed] = defaultdict(_Owed)  # by port, under its lock


class RelayOptions(BaseModel):
    """Options of one relay channel (`[pool.power.<device>]` with kind = "serial-relay")."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    port: str = Field(description="Serial device or pyserial URL, e.g. /dev/labd-relay-A.")
    baudrate: int = Field(9600, ge=50, le=4_000_000, description="Line speed.")
    channel: int = Field(1, ge=1, le=64, description="Channel number, for logs.")
    on: str = Field(description="Bytes that close the relay, as hex: 'A0 01 01 A2'.")
    off: str = Field(description="Bytes that open the relay, as hex: 'A0 01 00 A1'.")
    settle_s: float = Field(0.1, ge=0, le=10, description="Pause after a command.")
    verify_echo: bool = Field(False, description="The board echoes each command: check it.")
    timeout_s: float = Field(2.0, gt=0, le=30, description="Serial read/write time-out.")

    @field_validator("on", "off")
    @classmethod
    def _hex(cls, value: str) -> str:
        try:
            if not bytes.fromhex(value):
                raise ValueError("empty")
        except ValueError:
            raise ValueError("not hex bytes like 'A0 01 01 A2'") from None
        return value


class SerialRelay(PowerControl[RelayOptions]):
    async def on(self) -> None:
        await asyncio.to_thread(self._send, bytes.fromhex(self.options.on))

    async def off(self) -> None:
        await asyncio.to_thread(self._send, bytes.fromhex(self.options.off))

    def _send(self, command: bytes) -> None:
        o = self.options
        with _port_locks[o.port]:
            try:
                with serial.serial_for_url(
                    o.port, baudrate=o.baudrate, timeout=o.timeout_s, write_timeout=o.timeout_s
                ) as line:
                    _await_late_echoes(line, _owed[o.port], o.timeout_s)
                    line.reset_input_buffer()  # what came before this command is not its echo
                    line.write(command)
                    line.flush()
                    if o.verify_echo:
                        echo = line.read(len(command))
                        if echo != command:
                            # The bytes that did not come may still: never the next one's
                            # echo. A board that answered in full (wrongly) owes nothing.
                            if missing := len(command) - len(echo):
                                owed = _owed[o.port]
                                owed.count += missing
                                owed.until = time.monotonic() + LATE_ECHOES * o.timeout_s
                            raise InfrastructureError(
                                f"relay on {o.port} channel {o.channel} answered {echo.hex(' ')!r}"
                                f" to {command.hex(' ')!r} within {o.timeout_s} s"
                            )
            except serial.SerialException as e:
                raise InfrastructureError(f"relay on {o.port}: {e}") from e
        time.sleep(o.settle_s)  # in a worker thread: let the relay contacts settle


def _await_late_echoes(line: serial.SerialBase, owed: _Owed, timeout_s: float) -> None:
    """Reads (and drops) the echoes a port still owes, until they have all come or are given
    up for lost: whatever arrives after that cannot be mistaken for the next echo."""
    while owed.count > 0 and (left := owed.until - time.monotonic()) > 0:
        line.timeout = left
        owed.count -= len(line.read(owed.count))
    owed.count = 0
    line.timeout = timeout_s
