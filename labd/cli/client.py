"""A small client of the daemon's API (http.client: nothing heavy to import).

Where it goes:
1. `--api-url` or $LABD_API_URL: `http(s)://host:port` of a daemon elsewhere, with the bearer
   token of the credentials file (`labd.auth.find_credentials`), or `unix:/path/to/api.sock`;
2. else the local daemon's Unix socket (http.api_socket, or api.sock in the state directory,
   and the system daemon's /var/lib/labd/api.sock): the account running the command is the
   credential, so the common case needs no flag and no token;
3. else the local daemon's TCP API (http.api_host:api_port), with the credentials' token.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from labd.config import Settings, load_config
from labd.errors import LabdError, UsageError

SYSTEM_SOCKET = Path("/var/lib/labd/api.sock")
TIMEOUT_S = 60.0
PAGE = 5000  # iterations asked for per results page (the daemon's largest)


class ApiError(LabdError):
    """The daemon answered with an error; `problems` lists what it said."""

    def __init__(self, status: int, problems: list[str]) -> None:
        self.status = status
        self.problems = problems
        self.exit_code = 2 if 400 <= status < 500 else 3
        super().__init__("\n".join(problems))


@dataclass(frozen=True)
class Endpoint:
    """One way to the API: a Unix socket, or a TCP address with a bearer token."""

    name: str  # what messages call it
    socket_path: Path | None = None
    host: str = ""
    port: int = 0
    tls: bool = False
    token: str | None = None

    def connect(self) -> http.client.HTTPConnection:
        """A connected connection; OSError when nothing answers there."""
        conn: http.client.HTTPConnection
        if self.socket_path is not None:
            conn = _UnixConnection(self.socket_path, TIMEOUT_S)
        elif self.tls:
            conn = http.client.HTTPSConnection(self.host, self.port, timeout=TIMEOUT_S)
        else:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=TIMEOUT_S)
        conn.connect()
        return conn


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: Path, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        from labd.daemon import reachable

        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            with reachable(self.socket_path) as address:
                sock.connect(address)
        except OSError:
            sock.close()
            raise
        self.sock = sock


class Client:
    def __init__(self, settings: Settings, api_url: str = "", connect_wait_s: float = 0.0) -> None:
        self.settings = settings
        self.api_url = api_url
        self.connect_wait_s = connect_wait_s

    @classmethod
    def from_args(cls, args: argparse.Namespace, wait: float = 0.0) -> Client:
        """The client the command line asks for (--config, --api-url or $LABD_API_URL)."""
        url = getattr(args, "api_url", None) or os.environ.get("LABD_API_URL", "")
        return cls(load_config(args.config).settings, url, wait)

    def endpoints(self) -> list[Endpoint]:
        """Where to try, in order (see the module doc)."""
        from labd.auth import find_credentials
        from labd.daemon import api_socket_path

        state_dir = self.settings.daemon.state_path
        if self.api_url:
            return [_endpoint_of(self.api_url, lambda: find_credentials(state_dir))]
        sockets = [api_socket_path(self.settings)]
        if not self.settings.http.api_socket and not self.settings.daemon.state_dir:
            sockets.append(SYSTEM_SOCKET)  # a daemon systemd runs as another account
        found = [Endpoint(f"unix:{path}", socket_path=path) for path in dict.fromkeys(sockets)]
        http = self.settings.http
        if http.api_host:
            credentials = find_credentials(state_dir)
            host = "127.0.0.1" if http.api_host in ("0.0.0.0", "") else http.api_host
            host = "::1" if host == "::" else host
            found.append(
                Endpoint(
                    f"http://{_bracketed(host)}:{http.api_port}",
                    host=host,
                    port=http.api_port,
                    token=credentials.token if credentials else None,
                )
            )
        return found

    def call(self, method: str, path: str, body: Any = None) -> Any:
        """One request to /api/v1`path`; retries connecting for `connect_wait_s` (a daemon
        still starting). Only a failed connection moves on to the next endpoint, so a write
        is never sent twice."""
        deadline = time.monotonic() + self.connect_wait_s
        while True:
            endpoints = self.endpoints()
            failures: list[str] = []
            for endpoint in endpoints:
                try:
                    conn = endpoint.connect()
                except OSError as e:
                    failures.append(f"{endpoint.name}: {e.strerror or e}")
                    continue
                with contextlib.closing(conn):
                    return self._exchange(conn, endpoint, method, path, body)
            if time.monotonic() < deadline:
                time.sleep(0.2)
                continue
            raise LabdError(
                f"cannot reach the daemon at {'; '.join(failures)} (is `labd run` running?)"
            )

    def _exchange(
        self,
        conn: http.client.HTTPConnection,
        endpoint: Endpoint,
        method: str,
        path: str,
        body: Any,
    ) -> Any:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if endpoint.token:
            headers["Authorization"] = f"Bearer {endpoint.token}"
        data = json.dumps(body).encode() if body is not None else b"" if method != "GET" else None
        try:
            conn.request(method, "/api/v1" + path, body=data, headers=headers)
            response = conn.getresponse()
            raw = response.read()
        except OSError as e:
            raise LabdError(f"{endpoint.name}: the daemon did not answer: {e}") from e
        try:
            answer = json.loads(raw) if raw else {}
        except ValueError:
            answer = None
        if response.status >= 400:
            problems = answer.get("errors") if isinstance(answer, dict) else None
            problems = list(problems or [f"HTTP {response.status} {response.reason}"])
            if response.status == 401 and not endpoint.token:
                problems.append(
                    "no credentials found: set LABD_CREDENTIALS or write "
                    "~/.config/labd/credentials.toml (the lab's admin gives them)"
                )
            raise ApiError(response.status, problems)
        if answer is None:
            raise LabdError(f"{endpoint.name}: the daemon's answer is not JSON")
        return answer

    def results(self, job_id: str) -> dict[str, Any]:
        """Every page of a job's results joined: raw values of every attempt and the summary."""
        path = f"/jobs/{quote(job_id, safe='')}/results"
        return self._joined(path, self.call("GET", path), "iterations")

    def artefacts(self, job_id: str) -> dict[str, Any]:
        """Every page of a job's artefact listing joined (an older daemon answers one page
        without `next`)."""
        path = f"/jobs/{quote(job_id, safe='')}/artefacts"
        first = self.call("GET", f"{path}?{urlencode({'limit': PAGE})}")
        return self._joined(path, first, "artefacts")

    def _joined(self, path: str, view: dict[str, Any], key: str) -> dict[str, Any]:
        """`view` with the `key` lists of the pages after it appended, following `next`."""
        while view.get("next") is not None:
            query = urlencode({"offset": view["next"], "limit": PAGE})
            page = self.call("GET", f"{path}?{query}")
            view[key] += page[key]
            view["next"] = page["next"]
        return view

    def history(self, suite: str, test: str) -> dict[str, Any]:
        """A test's whole history (every page, oldest first)."""
        pages: list[dict[str, Any]] = []
        before = ""
        while True:
            query = {"suite": suite, "test": test} | ({"before": before} if before else {})
            pages.append(self.call("GET", "/history?" + urlencode(query)))
            before = pages[-1].get("next") or ""
            if not before:
                break
        series: dict[str, dict[str, Any]] = {}
        for page in reversed(pages):  # pages come newest first; each is oldest first
            for name, entry in page["series"].items():
                joined = series.setdefault(name, {})
                for key, values in entry.items():
                    if isinstance(values, list):
                        joined.setdefault(key, []).extend(values)
                    else:  # higher_is_better: the newest page's, as each page's is its newest
                        joined[key] = values
        return {"suite": suite, "test": test, "series": series}


def _endpoint_of(url: str, credentials: Any) -> Endpoint:
    malformed = UsageError(f"--api-url: {url!r} is not http(s)://HOST:PORT or unix:/PATH")
    if url.startswith("unix:"):
        path = url.removeprefix("unix:").removeprefix("//")
        if not path:
            raise malformed
        return Endpoint(url, socket_path=Path(path))
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. "Invalid IPv6 URL" for an unclosed '['
        raise malformed from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise malformed
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        # Dropped in silence, a proxy's prefix sent every request elsewhere.
        raise UsageError(
            f"--api-url: {url!r}: labd's API is at the root of its port; a path, a query or a "
            "fragment is not supported (give http(s)://HOST:PORT)"
        )
    found = credentials()
    if found is None:
        raise UsageError(
            f"--api-url {url}: no credentials for it: set LABD_CREDENTIALS or write "
            "~/.config/labd/credentials.toml (the lab's admin gives them)"
        )
    tls = parts.scheme == "https"
    try:
        port = parts.port or (443 if tls else 80)
    except ValueError as e:
        raise UsageError(f"--api-url: {url!r}: {e}") from None
    return Endpoint(url, host=parts.hostname, port=port, tls=tls, token=found.token)


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host
