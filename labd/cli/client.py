"""A small client of the daemon's local API (urllib: nothing heavy to import)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

from labd.config import HttpSettings
from labd.errors import LabdError


class ApiError(LabdError):
    """The daemon answered with an error; `problems` lists what it said."""

    def __init__(self, status: int, problems: list[str]) -> None:
        self.status = status
        self.problems = problems
        self.exit_code = 2 if 400 <= status < 500 else 3
        super().__init__("\n".join(problems))


class Client:
    def __init__(self, http: HttpSettings, connect_wait_s: float = 0.0) -> None:
        self.base = f"http://{http.host}:{http.port}/api/v1"
        self.connect_wait_s = connect_wait_s

    def call(self, method: str, path: str, body: Any = None) -> Any:
        """One request; retries connecting for `connect_wait_s` (a daemon still starting)."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            self.base + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        deadline = time.monotonic() + self.connect_wait_s
        while True:
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    return json.load(response)
            except urllib.error.HTTPError as e:
                try:
                    problems = json.load(e).get("errors", [str(e)])
                except ValueError:
                    problems = [f"HTTP {e.code}"]
                raise ApiError(e.code, problems) from None
            except OSError as e:
                if time.monotonic() < deadline:
                    time.sleep(0.2)
                    continue
                reason = getattr(e, "reason", e)
                raise LabdError(
                    f"cannot reach the daemon at {self.base}: {reason} (is `labd run` running?)"
                ) from e
