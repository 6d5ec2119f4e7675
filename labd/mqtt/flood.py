"""What a flood of MQTT messages costs labd, bounded: refusals of messages no principal signed
(junk, a scanner, a client set up wrong) are answered on <prefix>/errors and audited up to a
rate, and past it only counted, so a flood neither delays the lab's real requests behind
thousands of answers nor fills the log; and messages arriving faster than labd reads them wait
in an inbox of bounded size, past which they are dropped unread, counted."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import aiomqtt
import structlog

from labd.auth import ANONYMOUS, Audit

log = structlog.get_logger("labd.mqtt")


class MinuteTally:
    """A count said in one warning a minute while it grows, the last a minute after it
    stopped growing (then quiet until it grows again)."""

    EVERY_S = 60.0

    def __init__(self, message: str, **fields: object) -> None:
        self.message, self.fields = message, fields
        self.count = 0  # since the last warning
        self._timer: asyncio.TimerHandle | None = None

    def add(self) -> None:
        self.count += 1
        if self._timer is None:
            self._say()

    def _say(self) -> None:
        self._timer = None
        if not self.count:
            return
        log.warning(self.message, **self.fields, left_out=self.count)
        self.count = 0
        self._timer = asyncio.get_running_loop().call_later(self.EVERY_S, self._say)


class UnsignedFlood:
    RATE = 20.0  # refusals answered a second
    BURST = 100.0  # answered at once after a quiet spell

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.tokens = self.BURST
        self.stamp = clock()
        self.unanswered = MinuteTally(
            "unsigned mqtt messages are coming faster than labd answers them; the rest are "
            "refused without an answer on the errors topic or an audit line",
            answered_per_s=self.RATE,
        )

    def admit(self) -> bool:
        """Whether to answer and audit this refusal; False past the rate (counted, and said
        in one warning a minute while it lasts, the last a minute after it ended)."""
        now = self.clock()
        self.tokens = min(self.BURST, self.tokens + (now - self.stamp) * self.RATE)
        self.stamp = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        self.unanswered.add()
        return False


class InboxOverflow:
    """Messages dropped unread because labd's inbox was full: said in a warning a minute and
    counted in `labd_auth_refusals_total{channel="mqtt",reason="inbox_full"}` each second
    (one event a message would cost a flood's every message again)."""

    COUNT_EVERY_S = 1.0

    def __init__(
        self,
        audit: Audit,
        messages: int = 10_000,  # about 3 s of reading, the daemon's own speed
        size: int = 64 * 2**20,  # bytes of payload: large messages fill it sooner
    ) -> None:
        self.audit, self.messages, self.size = audit, messages, size
        self.uncounted = 0
        self._counting: asyncio.TimerHandle | None = None
        self.dropped = MinuteTally(
            "mqtt messages are arriving faster than labd reads them; its inbox is full and "
            "the rest are dropped unread (a request among them gets no answer: send it again)",
            inbox_messages=messages,
            inbox_bytes=size,
        )

    def drop(self) -> None:
        self.dropped.add()
        self.uncounted += 1
        if self._counting is None:
            self._counting = asyncio.get_running_loop().call_later(self.COUNT_EVERY_S, self._count)

    def _count(self) -> None:
        self._counting = None
        count, self.uncounted = self.uncounted, 0
        self.audit.counted("mqtt", ANONYMOUS, "unknown", "-", "inbox_full", count)

    def inbox(self) -> type[asyncio.Queue[aiomqtt.Message]]:
        """The queue class for aiomqtt's incoming messages: at most `messages` of them and
        `size` bytes of payload, the rest dropped here (aiomqtt's own bound logs each one it
        drops). Messages carrying a signature have as much again of their own: a flood of
        junk took 19 of 28 signed requests with it (a signed flood is bounded too)."""
        overflow = self

        class Inbox(asyncio.Queue[aiomqtt.Message]):
            def __init__(self, maxsize: int = 0) -> None:
                super().__init__()
                self.held = 0  # bytes of payload

            def put_nowait(self, item: aiomqtt.Message) -> None:
                size = _size(item)
                share = 2 if _signed(item) else 1
                full = self.qsize() >= share * overflow.messages
                if full or self.held + size > share * overflow.size:
                    overflow.drop()
                    return
                self.held += size
                super().put_nowait(item)

            def get_nowait(self) -> aiomqtt.Message:
                item = super().get_nowait()
                self.held -= _size(item)
                return item

        return Inbox


def _signed(message: aiomqtt.Message) -> bool:
    """Whether the payload looks signed (labd's envelope has an "auth" key): a hint of which
    to keep, checked when the message is read whole."""
    payload = message.payload
    return isinstance(payload, bytes | bytearray) and b'"auth"' in payload


def _size(message: aiomqtt.Message) -> int:
    payload = message.payload
    return len(payload) if isinstance(payload, bytes | bytearray | str) else 0
