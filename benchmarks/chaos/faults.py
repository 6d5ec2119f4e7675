"""Faults and their schedule. A schedule is drawn from a seed, so a run can be repeated."""

from __future__ import annotations

import asyncio
import random
import signal
import time
from dataclasses import dataclass

from benchmarks.chaos.lab import Host, Timing
from benchmarks.chaos.services import PrivateMosquitto, PrivatePostgres

KINDS = (
    "sigkill",
    "sigstop",
    "broker_restart",
    "postgres_restart",
    "postgres_delay",
    "postgres_cut",
    "broker_delay",
    "broker_cut",
)
LINK_FAULT_S = 5.0  # a cut longer than the lease TTL: the host must fence itself
DELAY_S = 0.2  # per chunk, each way


@dataclass(frozen=True)
class Planned:
    at_s: float  # after the campaign's start
    kind: str
    host: int  # which host (ignored by broker and database restarts)


@dataclass
class Injected:
    kind: str
    hosts: list[str]  # the hosts it hit (all of them for a server restart)
    started: float  # time.time()
    ended: float = 0.0  # when the harness finished the fault (healed, restarted, resumed)


def schedule(seed: int, count: int, hosts: int, first_s: float, gap: tuple[float, float],
             every_kind_once: bool) -> list[Planned]:  # fmt: skip
    """`count` faults from `first_s` on, `gap` seconds apart (uniform); with
    `every_kind_once`, each kind once in a random order."""
    rng = random.Random(seed)
    kinds = list(KINDS)
    if every_kind_once:
        rng.shuffle(kinds)
        picked = kinds[:count]
    else:
        picked = [rng.choice(kinds) for _ in range(count)]
    at, plan = first_s, []
    for kind in picked:
        plan.append(Planned(round(at, 2), kind, rng.randrange(hosts)))
        at += rng.uniform(*gap)
    return plan


async def inject(
    planned: Planned,
    hosts: list[Host],
    pg: PrivatePostgres,
    broker: PrivateMosquitto,
    timing: Timing,
) -> Injected:
    """Do one fault to its end (the host back, the link healed, the server up)."""
    host = hosts[planned.host]
    kind = planned.kind
    every = [h.name for h in hosts]
    done = Injected(kind, every if kind.endswith("_restart") else [host.name], time.time())
    if kind == "sigkill":
        host.kill()
        await asyncio.sleep(1.0)
        host.start()
    elif kind == "sigstop":
        host.signal(signal.SIGSTOP)
        await asyncio.sleep(timing.lease_ttl_s + 2 * timing.reap_interval_s + 1.0)
        host.signal(signal.SIGCONT)
    elif kind == "broker_restart":
        await asyncio.to_thread(broker.restart)
    elif kind == "postgres_restart":
        await asyncio.to_thread(pg.restart)
    else:
        proxy = host.pg if kind.startswith("postgres") else host.mqtt
        if kind.endswith("_cut"):
            proxy.cut()
        else:
            proxy.delay_s = DELAY_S
        await asyncio.sleep(LINK_FAULT_S)
        proxy.heal()
    done.ended = time.time()
    return done
