"""The cost of checking who sent an MQTT request: one signed submission verified (RFC 8785
canonical form + HMAC-SHA256 + freshness), p50 and p99, and Ed25519 beside it for the record
of why HMAC was chosen.

Run: python benchmarks/auth_bench.py [--count 20000]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from labd.auth import Principals, new_credentials, sign, verify
from labd.auth.principals import Principal, Role

TOPIC = "labd/v1/bench/jobs/submit"
SPEC = {  # the README's example job, as CI submits it
    "suite": "host",
    "test": "python-startup",
    "scenario": "command",
    "iterations": 20,
    "warmup": 2,
    "params": {"command": ["python3", "-c", "pass"], "cpu": 0, "disable_aslr": True},
    "build": {"revision": "0123456789abcdef0123456789abcdef01234567", "branch": "main"},
}


def timings(work: object, count: int, clock: object) -> np.ndarray:
    samples = np.empty(count)
    for n in range(count):
        start = clock()  # type: ignore[operator]
        work()  # type: ignore[operator]
        samples[n] = clock() - start  # type: ignore[operator]
    return samples / 1000  # microseconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=20_000)
    args = parser.parse_args()
    creds = new_credentials("ci")
    principals = Principals([Principal("ci", Role.SUBMITTER, keys={creds.key_id: creds.key})])
    message = {"schema_version": 2, "id": "job-1", "reply_to": "x", "spec": SPEC}
    # As the daemon gets it: JSON text, parsed, then verified.
    payload = json.dumps(sign(message, TOPIC, "ci", creds.key_id, creds.key))
    data = json.loads(payload)

    def hmac_verify() -> None:
        verify(data, TOPIC, principals, max_age_s=900, clock_skew_s=60)

    key = Ed25519PrivateKey.generate()
    signed_bytes = rfc8785.dumps(data)
    signature = key.sign(signed_bytes)
    public = key.public_key()

    def ed25519_verify() -> None:
        public.verify(signature, rfc8785.dumps(data))

    rows = []
    for name, work in (
        ("HMAC-SHA256 over RFC 8785 (labd)", hmac_verify),
        ("Ed25519 over RFC 8785 (not taken)", ed25519_verify),
    ):
        timings(work, 500, time.perf_counter_ns)  # warm up
        # CPU time of this thread is the cost; wall time adds whatever else the machine ran.
        cpu = timings(work, args.count, time.thread_time_ns)
        wall = timings(work, args.count, time.perf_counter_ns)
        rows.append((name, *np.percentile(cpu, [50, 99]), *np.percentile(wall, [50, 99])))
    print(f"payload: {len(payload)} bytes; {args.count} verifications each")
    header = f"{'verification':<36} {'CPU p50':>8} {'CPU p99':>8} {'wall p50':>9} {'wall p99':>9}"
    print(header + "  (us)")
    for name, c50, c99, w50, w99 in rows:
        print(f"{name:<36} {c50:>8.1f} {c99:>8.1f} {w50:>9.1f} {w99:>9.1f}")
    print("target: p99 below 100 us")


if __name__ == "__main__":
    main()
