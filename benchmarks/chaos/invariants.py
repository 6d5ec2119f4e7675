"""The invariants of a chaos run, checked from the store and the recorded MQTT history after
the faults (Jepsen's way: record, then check). Each yields its count of violations and a few
examples."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from benchmarks.chaos.lab import Received
from labd.model import Iteration, Job


@dataclass
class Verdict:
    name: str
    violations: int = 0
    examples: list[str] = field(default_factory=list)

    def violate(self, example: str) -> None:
        self.violations += 1
        if len(self.examples) < 5:
            self.examples.append(example)


def job_events(messages: list[Received]) -> dict[str, dict[int, dict[str, Any]]]:
    """Per job, its events by sequence number (duplicates collapse: at-least-once)."""
    events: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
    for m in messages:
        if m.topic.endswith("/events") and "seq" in m.body and "job_id" in m.body:
            events[m.body["job_id"]].setdefault(int(m.body["seq"]), m.body)
    return events


def check(
    jobs: list[Job],
    iterations: dict[str, list[Iteration]],
    event_seq: dict[str, int],
    messages: list[Received],
    statuses: dict[str, str],
    hosts: list[str],
) -> list[Verdict]:
    events = job_events(messages)
    once = Verdict("every job ends exactly once")
    overlap = Verdict("no job ran on two hosts at overlapping times")
    lost = Verdict("no raw value lost")
    duplicated = Verdict("no raw value duplicated across attempts")
    gaps = Verdict("event sequence numbers complete per job")
    device_twice = Verdict("no device leased twice at once")
    status = Verdict("every host's status topic right at the end")

    for job in jobs:
        seen = events.get(job.id, {})
        finished = [s for s, e in seen.items() if e["kind"] == "finished"]
        if not job.state.terminal:
            once.violate(f"{job.id} never ended ({job.state.value})")
        elif len(finished) != 1:
            once.violate(f"{job.id} has {len(finished)} finished events")

        its = iterations.get(job.id, [])
        spans = _attempt_spans(its)
        ordered = sorted(spans.items(), key=lambda kv: kv[1][0])
        for (a1, (_, end1, hosts1)), (a2, (start2, _, hosts2)) in pairwise(ordered):
            if start2 < end1 and hosts1 != hosts2:
                overlap.violate(f"{job.id}: attempt {a1} on {hosts1} overlaps attempt {a2}")

        if job.state.value == "succeeded":
            last = [i for i in its if i.attempt == job.attempts]
            want = set(range(job.spec.warmup + job.spec.iterations))
            have = [i.index for i in last]
            if set(have) != want or any(i.values.get("index") != i.index for i in last):
                lost.violate(f"{job.id}: attempt {job.attempts} holds {sorted(have)}")

        # In sequence order, not as heard: a lease given back uncounted (its host restarted
        # before the run) may reach the broker after the next lease of the same attempt.
        leased_on = {
            int(e["data"].get("attempt", 0)): e["data"].get("device_id", "")
            for e in (seen[s] for s in sorted(seen))
            if e["kind"] == "leased"
        }
        for i in its:
            holder = leased_on.get(i.attempt)
            if holder is not None and holder != i.device_id:
                duplicated.violate(
                    f"{job.id}: attempt {i.attempt} index {i.index} written from "
                    f"{i.device_id}, leased to {holder}"
                )

        want_seqs = set(range(1, event_seq.get(job.id, 0) + 1))
        if missing := want_seqs - set(seen):
            gaps.violate(f"{job.id}: seq {sorted(missing)[:5]} of {max(want_seqs)} missing")

    for device, spans in _device_leases(events).items():
        spans.sort()
        for (_, e1, j1), (s2, _, j2) in pairwise(spans):
            if s2 < e1:
                device_twice.violate(f"{device}: {j2} leased at {s2:.3f} while {j1} held it")

    for host in hosts:
        if statuses.get(host) != "online":
            status.violate(f"{host}: {statuses.get(host, 'no status')}")
    return [once, overlap, lost, duplicated, gaps, device_twice, status]


def _attempt_spans(its: list[Iteration]) -> dict[int, tuple[float, float, frozenset[str]]]:
    spans: dict[int, tuple[float, float, frozenset[str]]] = {}
    for i in its:
        start, end = i.started_at.timestamp(), i.finished_at.timestamp()
        if i.attempt in spans:
            s, e, d = spans[i.attempt]
            spans[i.attempt] = (min(s, start), max(e, end), d | {i.device_id})
        else:
            spans[i.attempt] = (start, end, frozenset({i.device_id}))
    return spans


def _device_leases(
    events: dict[str, dict[int, dict[str, Any]]],
) -> dict[str, list[tuple[float, float, str]]]:
    """Per device, (leased at, lease ended at, job) from each job's ordered events."""
    leases: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    for job_id, seen in events.items():
        open_lease: tuple[float, str] | None = None
        for seq in sorted(seen):
            e = seen[seq]
            if e["kind"] == "leased":
                open_lease = (float(e["time"]), e["data"].get("device_id", ""))
            elif e["kind"] in ("requeued", "finished") and open_lease is not None:
                leases[open_lease[1]].append((open_lease[0], float(e["time"]), job_id))
                open_lease = None
    return leases
