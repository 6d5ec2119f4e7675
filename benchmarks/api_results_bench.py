"""Heavy API answers under a burst: N clients read a job of many iterations at once.

A real `labd run` (SQLite) runs a short real job for one genuine iteration record, which is
copied into a job of --iterations iterations; after a restart, --clients clients each read
that job's whole results at once (every page, as `labd jobs results` does) while a prober asks
/healthz every 20 ms. Prints the daemon's RSS before and its peak (VmHWM, from /proc) during the
burst, the burst's duration, the slowest /healthz answer (how long the event loop was held)
and the loop-lag histogram's count of stalls over 0.1 s.

Run: python benchmarks/api_results_bench.py [--iterations 4000] [--clients 8]
To measure another checkout's daemon (e.g. before a change), put it first on PYTHONPATH and
run from a directory that holds no labd package (python puts the working directory first):
    cd /tmp && PYTHONPATH=/tmp/old:/tmp/old/drivers python $REPO/benchmarks/api_results_bench.py \
        --before
(--before: a daemon whose API was on the side port, with no http.api_port key.)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

SPEC = {
    "suite": "bench",
    "test": "startup",
    "scenario": "command",
    "iterations": 3,
    "warmup": 0,
    "params": {"command": ["python3", "-c", "pass"]},
}


class Daemon:
    def __init__(self, config: Path) -> None:
        self.log = config.with_suffix(".log")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "labd", "--config", str(config), "run"],
            stderr=self.log.open("wb"),
            stdout=subprocess.DEVNULL,
        )
        self.side = int(self._wait("http side port listening")["port"])
        api = self._find("http api listening")
        self.api = int(api["port"]) if api else self.side  # before the API had its own port
        state = Path(tomllib.loads(config.read_text())["daemon"]["state_dir"])
        local = state / "credentials" / "local.toml"
        self.token = tomllib.loads(local.read_text())["token"] if local.exists() else ""

    def _find(self, event: str) -> dict[str, Any] | None:
        for line in self.log.read_text().splitlines():
            if line.startswith("{") and json.loads(line).get("event") == event:
                return dict(json.loads(line))
        return None

    def _wait(self, event: str) -> dict[str, Any]:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if found := self._find(event):
                time.sleep(0.5)  # the API may be announced just after the side port
                return found
            time.sleep(0.05)
        raise SystemExit(f"daemon did not log {event!r}:\n{self.log.read_text()}")

    def call(self, method: str, path: str, body: Any = None) -> Any:
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.api}/api/v1{path}", data=data, method=method, headers=headers
        )
        with urllib.request.urlopen(request, timeout=300) as response:
            return json.load(response)

    def results(self, job_id: str) -> int:
        """Every page of the job's results, as the CLI reads them; the iterations read."""
        view = self.call("GET", f"/jobs/{job_id}/results")
        count = len(view["iterations"])
        while view.get("next") is not None:
            view = self.call("GET", f"/jobs/{job_id}/results?offset={view['next']}&limit=5000")
            count += len(view["iterations"])
        return count

    def memory_kib(self) -> dict[str, int]:
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        return {k: int(v) for k, v in re.findall(r"^(VmRSS|VmHWM):\s+(\d+) kB", status, re.M)}

    def cpu_s(self) -> float:
        """CPU time the daemon has used (user + system): a figure other load does not skew."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stalls(self) -> float:
        """Loop-lag observations over 0.1 s so far (the histogram's +Inf less its 0.1 bucket)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.side}/metrics", timeout=30) as r:
            text = r.read().decode()
        counts = dict(
            re.findall(
                r'^labd_event_loop_lag_seconds_bucket\{.*le="([^"]+)".*\} (\S+)$', text, re.M
            )
        )
        return float(counts["+Inf"]) - float(counts["0.1"])

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)


def make_job(db: Path, source: str, job_id: str, iterations: int) -> None:
    """Copy job `source` and its first iteration `iterations` times into a new job."""
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        row = dict(conn.execute("SELECT * FROM jobs WHERE id = ?", (source,)).fetchone())
        record = json.loads(
            conn.execute(
                "SELECT record FROM iterations WHERE job_id = ? ORDER BY idx", (source,)
            ).fetchone()[0]
        )
        spec = json.loads(row["spec"])
        spec["iterations"] = iterations
        row.update(seq=None, id=job_id, spec=json.dumps(spec), lease_token="")
        row["spec_hash"] = "bench-" + job_id
        columns = ", ".join(row)
        conn.execute(
            f"INSERT INTO jobs ({columns}) VALUES ({', '.join('?' * len(row))})",
            list(row.values()),
        )
        rows = []
        for index in range(iterations):
            record.update(job_id=job_id, index=index, warmup=False)
            record["values"] = {k: v * (1 + index % 7 / 100) for k, v in record["values"].items()}
            rows.append((job_id, record["attempt"], index, json.dumps(record)))
        conn.executemany(
            "INSERT INTO iterations (job_id, attempt, idx, record) VALUES (?,?,?,?)", rows
        )


def burst(daemon: Daemon, job_id: str, clients: int) -> dict[str, float]:
    worst, stop = [0.0], threading.Event()

    def probe() -> None:
        while not stop.is_set():
            start = time.perf_counter()
            with urllib.request.urlopen(f"http://127.0.0.1:{daemon.side}/healthz", timeout=60):
                pass
            worst[0] = max(worst[0], time.perf_counter() - start)
            time.sleep(0.02)

    stalls_before, cpu_before = daemon.stalls(), daemon.cpu_s()
    prober = threading.Thread(target=probe)
    prober.start()
    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        counts = list(pool.map(lambda _: daemon.results(job_id), range(clients)))
    elapsed = time.perf_counter() - start
    time.sleep(0.3)
    stop.set()
    prober.join()
    assert len(set(counts)) == 1, counts
    return {
        "seconds": elapsed,
        "healthz_max_s": worst[0],
        "stalls": daemon.stalls() - stalls_before,
        "cpu_s": daemon.cpu_s() - cpu_before,
        "iterations": counts[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=4000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--before", action="store_true", help="a daemon without http.api_port")
    args = parser.parse_args()
    api_port = "" if args.before else "api_port = 0\n"
    with tempfile.TemporaryDirectory(prefix="labd-results-bench-") as work:
        config = Path(work) / "labd.toml"
        config.write_text(
            f'[daemon]\nlab = "bench"\nstate_dir = "{work}/state"\nshutdown_grace = 5\n'
            f"[http]\nport = 0\n{api_port}"
            '[mqtt]\nenabled = false\n[log]\nformat = "json"\n'
        )
        daemon = Daemon(config)
        job = daemon.call("POST", "/jobs", {"id": "seed", "spec": SPEC, "source": "bench"})["job"]
        while daemon.call("GET", f"/jobs/{job['id']}")["job"]["state"] != "succeeded":
            time.sleep(0.2)
        daemon.stop()
        make_job(Path(work) / "state" / "labd.db", "seed", "big", args.iterations)
        daemon = Daemon(config)
        daemon.results("seed")  # imports (scipy) warmed as in a running lab; "big" stays cold
        before = daemon.memory_kib()
        Path(f"/proc/{daemon.proc.pid}/clear_refs").write_text("5")  # VmHWM := VmRSS
        found = burst(daemon, "big", args.clients)
        after = daemon.memory_kib()
        daemon.stop()
    print(f"{args.clients} clients x results of a {found['iterations']:.0f}-iteration job")
    print(f"{'RSS before (MB)':<28}{before['VmRSS'] / 1024:>10.0f}")
    print(f"{'peak RSS in burst (MB)':<28}{after['VmHWM'] / 1024:>10.0f}")
    print(f"{'RSS after (MB)':<28}{after['VmRSS'] / 1024:>10.0f}")
    print(f"{'burst duration (s)':<28}{found['seconds']:>10.2f}")
    print(f"{'daemon CPU in burst (s)':<28}{found['cpu_s']:>10.2f}")
    print(f"{'slowest /healthz (s)':<28}{found['healthz_max_s']:>10.3f}")
    print(f"{'loop stalls > 0.1 s':<28}{found['stalls']:>10.0f}")


if __name__ == "__main__":
    main()
