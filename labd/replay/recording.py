"""Record: a forward proxy (plain HTTP, and CONNECT for HTTPS through the replay CA) that
fetches each request from its origin and keeps it as a HAR 1.2 entry, bodies included."""

from __future__ import annotations

import datetime
import json
import time
from pathlib import Path
from typing import Any

import structlog
from aiohttp import ClientError, ClientSession, web

from labd import __version__
from labd.replay.har import DROPPED_HEADERS, har_document, har_entry
from labd.replay.replaying import request_url

log = structlog.get_logger("labd.replay")


class RecordHandler:
    def __init__(self, session: ClientSession, out: Path) -> None:
        self.session = session
        self.out = out
        self.entries: list[dict[str, Any]] = []
        self.failed = 0

    async def __call__(self, request: web.BaseRequest) -> web.StreamResponse:
        url = request_url(request)
        body = await request.read()
        headers = [
            (k, v)
            for k, v in request.headers.items()
            if k.lower() not in DROPPED_HEADERS | {"host"}
        ]
        started = datetime.datetime.now(datetime.UTC).isoformat()
        began = time.perf_counter()
        try:
            async with self.session.request(
                request.method, url, headers=headers, data=body or None, allow_redirects=False
            ) as upstream:
                payload = await upstream.read()  # decoded: HAR keeps bodies uncompressed
                status, reason = upstream.status, upstream.reason or ""
                reply_headers = [
                    (k, v) for k, v in upstream.headers.items() if k.lower() not in DROPPED_HEADERS
                ]
        except (ClientError, TimeoutError, OSError) as e:
            self.failed += 1
            log.warning("record_upstream_failed", url=url, error=str(e) or type(e).__name__)
            return web.Response(
                status=502, text=f"labd replay record: {url}: {e or type(e).__name__}\n"
            )
        elapsed = (time.perf_counter() - began) * 1000
        self.entries.append(
            har_entry(
                request.method,
                url,
                headers,
                body,
                status,
                reason,
                reply_headers,
                payload,
                started,
                elapsed,
            )
        )
        return web.Response(
            status=status, reason=reason or None, headers=reply_headers, body=payload
        )

    def write(self) -> Path:
        """The archive, replaced atomically so a reader never sees half of it."""
        partial = self.out.with_name(self.out.name + ".partial")
        partial.write_text(json.dumps(har_document(self.entries, __version__), indent=1))
        partial.replace(self.out)
        return self.out
