"""How heavy the web console's pages are: bytes and time to answer, on a daemon that ran
real jobs.

A real `labd run` (SQLite) runs a job of --iterations iterations of `true` on the host, and
--builds one-iteration builds of another test; then each page is asked for --repeat times
(signed in as the local admin) and the table gives its size and the median and slowest time
to the last byte. The first answer of each page is left out (SciPy's import, first queries).

Run: python benchmarks/console_bench.py [--iterations 500] [--builds 60] [--repeat 7]
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any


def spec(test: str, revision: str, iterations: int) -> dict[str, Any]:
    return {
        "suite": "bench",
        "test": test,
        "scenario": "command",
        "iterations": iterations,
        "warmup": 0,
        "params": {"command": ["true"]},
        "build": {"revision": revision},
    }


class Daemon:
    def __init__(self, folder: Path) -> None:
        config = folder / "labd.toml"
        config.write_text(
            f'[daemon]\nlab = "console-bench"\nstate_dir = "{folder / "state"}"\n'
            '[http]\nport = 0\napi_port = 0\n[log]\nformat = "json"\n[mqtt]\nenabled = false\n'
            '[policy]\nprograms = ["true"]\n'
        )
        self.log = folder / "labd.log"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "labd", "--config", str(config), "run"],
            stderr=self.log.open("wb"),
            stdout=subprocess.DEVNULL,
        )
        self.side = int(self._wait("http side port listening")["port"])
        self.api = int(self._wait("http api listening")["port"])
        local = folder / "state" / "credentials" / "local.toml"
        self.token = str(tomllib.loads(local.read_text())["token"])

    def _wait(self, event: str) -> dict[str, Any]:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for line in self.log.read_text().splitlines():
                if line.startswith("{") and json.loads(line).get("event") == event:
                    return dict(json.loads(line))
            time.sleep(0.05)
        raise SystemExit(f"labd did not log {event!r}: see {self.log}")

    def api_call(self, method: str, path: str, body: Any = None) -> Any:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.api}{path}",
            data=json.dumps(body).encode() if body is not None else None,
            method=method,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as answer:
            return json.loads(answer.read())

    def run(self, job_id: str, job: dict[str, Any]) -> None:
        self.api_call("POST", "/api/v1/jobs", {"id": job_id, "spec": job})
        while self.api_call("GET", f"/api/v1/jobs/{job_id}")["job"]["state"] != "succeeded":
            time.sleep(0.05)

    def side_port(self, method: str, path: str, headers: dict[str, str], body: bytes = b""):
        conn = http.client.HTTPConnection("127.0.0.1", self.side, timeout=60)
        conn.request(method, path, body=body or None, headers=headers)
        answer = conn.getresponse()
        data = answer.read()
        conn.close()
        return answer, data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=500)
    parser.add_argument("--builds", type=int, default=60)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        daemon = Daemon(Path(tmp))
        try:
            daemon.run("big", spec("big", "r1", args.iterations))
            for n in range(args.builds):
                daemon.run(f"b{n}", spec("hist", f"r{n}", 3))
            base = f"http://127.0.0.1:{daemon.side}"
            form = urllib.parse.urlencode({"token": daemon.token}).encode()
            answer, _ = daemon.side_port(
                "POST",
                "/console/login",
                {"Origin": base, "Content-Type": "application/x-www-form-urlencoded"},
                form,
            )
            cookie = {"Cookie": answer.getheader("Set-Cookie", "").split(";")[0]}
            pages = [
                "/console/devices",
                "/console/queue",
                "/console/running",
                "/console/jobs",
                f"/console/jobs/big ({args.iterations} iterations)",
                f"/console/history?suite=bench&test=hist ({args.builds} builds)",
                "/console/compare?base=r1&new=r2",
            ]
            print(f"{'page':<58} {'bytes':>9} {'median ms':>10} {'max ms':>8}")
            for label in pages:
                path = label.split(" ")[0]
                times, size = [], 0
                for _ in range(args.repeat + 1):
                    start = time.perf_counter()
                    answer, data = daemon.side_port("GET", path, cookie)
                    times.append(1000 * (time.perf_counter() - start))
                    assert answer.status == 200, (path, answer.status, data[:200])
                    size = len(data)
                rest = times[1:]
                print(f"{label:<58} {size:>9,} {statistics.median(rest):>10.1f} {max(rest):>8.1f}")
        finally:
            daemon.proc.terminate()
            daemon.proc.wait(30)


if __name__ == "__main__":
    main()
