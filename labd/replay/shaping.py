"""Traffic shaping modelled on WebPageTest's shaping proxy: the round trip added to connection
set-up and to every request/response exchange, bandwidth as a link per direction that
serialises bytes in small chunks, optional jitter, and loss emulated at the HTTP level as a
retransmission timeout.

Named profiles are WebPageTest's (www/settings/connectivity.ini.sample in
WPO-Foundation/webpagetest): bandwidth in kbit/s, latency as the round-trip time.
"""

from __future__ import annotations

import asyncio
import random
import time

from pydantic import BaseModel, ConfigDict, Field

from labd.errors import UsageError
from labd.model import NetworkSpec


class Profile(BaseModel):
    """Bounds as NetworkSpec's (a manifest's [network]), which every profile is made from."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    name: str = "custom"
    latency_ms: float = Field(0.0, ge=0, le=10_000, description="round-trip time added")
    down_kbps: float = Field(0.0, ge=0, description="downstream bandwidth; 0 = unlimited")
    up_kbps: float = Field(0.0, ge=0, description="upstream bandwidth; 0 = unlimited")
    jitter_ms: float = Field(
        0.0, ge=0, le=10_000, description="each exchange's delay varies by up to this"
    )
    loss: float = Field(
        0.0, ge=0, lt=1, description="share of exchanges delayed by a retransmission timeout"
    )

    @property
    def shaped(self) -> bool:
        return bool(
            self.latency_ms or self.down_kbps or self.up_kbps or self.jitter_ms or self.loss
        )

    def fingerprint(self) -> dict[str, object]:
        return self.model_dump()


def _wpt(name: str, down: float, up: float, rtt: float) -> Profile:
    return Profile(name=name, latency_ms=rtt, down_kbps=down, up_kbps=up)


PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile(name="none"),
        _wpt("2g", 280, 256, 800),
        _wpt("3g-slow", 400, 400, 400),
        _wpt("3g", 1600, 768, 300),
        _wpt("3g-fast", 1600, 768, 150),
        _wpt("4g", 9000, 9000, 170),
        _wpt("lte", 12000, 12000, 70),
        _wpt("dsl", 1500, 384, 50),
        _wpt("cable", 5000, 1000, 28),
        _wpt("fios", 20000, 5000, 4),
    )
}


def profile(name: str) -> Profile:
    try:
        return PROFILES[name.lower()]
    except KeyError:
        raise UsageError(
            f"network profile {name!r}: unknown; known: {', '.join(PROFILES)}"
        ) from None


def profile_for(network: NetworkSpec) -> Profile:
    """A job's profile: the named one with the spec's overrides."""
    base = profile(network.profile)
    overrides = {
        name: value
        for name in ("latency_ms", "down_kbps", "up_kbps", "jitter_ms", "loss")
        if (value := getattr(network, name)) is not None
    }
    if not overrides:
        return base
    return base.model_copy(update={**overrides, "name": f"{base.name}+custom"})


SLACK_S = 0.005  # how late a busy sender may be and still catch up (about one chunk)


class Link:
    """One direction of a device's link at a fixed rate, shared by every connection of a
    server: bytes are serialised one after another, each chunk delivered when the link would
    have finished sending it. Idle time earns no credit (a token bucket's burst let about 16 KB
    through at once after every round trip, so a small response cost no transfer time).
    """

    def __init__(self, kbps: float) -> None:
        self.rate = kbps * 1000 / 8  # bytes per second
        self.free_at = 0.0  # when the link has sent everything queued so far (monotonic)

    def chunk_size(self) -> int:
        """Bytes per write: about 5 ms of the rate, at least one TCP segment."""
        return max(1460, int(self.rate * 0.005))

    async def take(self, n: int) -> None:
        """Wait until `n` more bytes have crossed the link, behind those queued before them
        (first come, first served)."""
        now = time.monotonic()
        # A sender at most SLACK_S late (the event loop, a write) goes on from where the link
        # was: each write's few tenths of a millisecond made 1 MB at 2 Mbit/s take 8% long.
        # Later than that the link was idle, and idle time earns nothing.
        start = self.free_at if self.free_at >= now - SLACK_S else now
        self.free_at = start + n / self.rate
        await asyncio.sleep(self.free_at - now)


class Shaper:
    def __init__(self, profile: Profile, seed: int = 0) -> None:
        self.profile = profile
        self.random = random.Random(seed)  # repeatable jitter and loss
        self.down = Link(profile.down_kbps) if profile.down_kbps else None
        self.up = Link(profile.up_kbps) if profile.up_kbps else None

    def exchange_delay(self) -> float:
        """Seconds before a response starts: one round trip, jitter, maybe a lost packet's
        retransmission timeout (at least 200 ms, as Linux's minimum RTO)."""
        p = self.profile
        delay = p.latency_ms
        if p.jitter_ms:
            delay += self.random.uniform(0, p.jitter_ms)
        if p.loss and self.random.random() < p.loss:
            delay += max(200.0, 3 * p.latency_ms)
        return delay / 1000

    def connect_delay(self, tls: bool) -> float:
        """Seconds a new connection costs before its first exchange: TCP's handshake, and
        TLS 1.3's one more round trip."""
        return self.profile.latency_ms * (2 if tls else 1) / 1000
