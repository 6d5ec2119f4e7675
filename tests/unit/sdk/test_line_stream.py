"""LineStream: a blocking reader's lines reach the event loop in order, its end and its
failure arrive as errors naming the stream, and closing unblocks a reader waiting on I/O."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator

import pytest

from labd.sdk import InfrastructureError, LineStream, MarkerStream


class SocketLines(LineStream):
    """Lines from a socket, as a device's log arrives."""

    ended_reason = "ended (device gone?)"

    def __init__(self, sock: socket.socket) -> None:
        super().__init__("log of test-device")
        self.sock = sock

    def read_lines(self) -> Iterator[str]:
        with self.sock.makefile("r") as lines:
            for line in lines:
                yield line.rstrip("\n")

    def interrupt(self) -> None:
        self.sock.shutdown(socket.SHUT_RDWR)


class Failing(LineStream):
    def read_lines(self) -> Iterator[str]:
        yield "one"
        raise OSError("the adb server went away")


async def next_line(stream: LineStream) -> str:
    async with asyncio.timeout(5):
        return await stream.next_line()


async def test_lines_in_order_then_the_end_names_the_stream() -> None:
    device, labd_end = socket.socketpair()
    stream = SocketLines(labd_end)
    assert isinstance(stream, MarkerStream)
    await stream.open()
    device.sendall(b"first\nsecond\n")
    assert [await next_line(stream), await next_line(stream)] == ["first", "second"]
    device.sendall(b"third\n")
    device.close()
    assert await next_line(stream) == "third"  # what came before the end is still read
    with pytest.raises(InfrastructureError, match=r"^log of test-device: ended \(device gone\?\)$"):
        await next_line(stream)
    await stream.close()


async def test_clear_forgets_what_came_before() -> None:
    device, labd_end = socket.socketpair()
    stream = SocketLines(labd_end)
    await stream.open()
    device.sendall(b"an earlier launch\n")
    await asyncio.sleep(0.2)
    stream.clear()
    device.sendall(b"this launch\n")
    assert await next_line(stream) == "this launch"
    await stream.close()
    device.close()


async def test_a_reader_failure_is_the_stream_s_error() -> None:
    stream = Failing("logcat of emulator-5554")
    await stream.open()
    assert await next_line(stream) == "one"
    with pytest.raises(InfrastructureError) as caught:
        await next_line(stream)
    assert str(caught.value) == "logcat of emulator-5554: failed: the adb server went away"


async def test_close_unblocks_a_waiting_reader_and_a_wait_can_time_out() -> None:
    device, labd_end = socket.socketpair()
    stream = SocketLines(labd_end)
    await stream.open()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.2):
            await stream.next_line()
    await stream.close()  # the reader was blocked in recv: it returns, the thread ends
    assert stream._thread is not None and not stream._thread.is_alive()
    device.close()


async def test_unread_lines_are_bounded_and_the_loss_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("labd.sdk.markers.MAX_PENDING_LINES", 3)
    device, labd_end = socket.socketpair()
    stream = SocketLines(labd_end)
    await stream.open()
    device.sendall(b"1\n2\n3\n4\n5\n")
    device.close()
    await asyncio.sleep(0.2)
    assert [await next_line(stream) for _ in range(3)] == ["3", "4", "5"]
    assert stream.dropped == 2
    await stream.close()
