"""Replay: answer from the archive in memory, shaped, through the listener's one port.

A request not in the archive gets a 404 with an `X-Labd-Replay: miss` header; misses are
counted and listed when the server stops. A HEAD not recorded as such is answered as its
recorded GET is, without the body, as an origin would. The unshaped path does no per-request
work beyond a dictionary lookup: headers are prepared once, at load, and so are bodies
encoded again in their recorded Content-Encoding (sent to clients that accept it).

Every client is served from the one copy of a body loaded with the archive: a large body is
written in slices of it, each after the client has taken the one before, so a slow reader
costs a socket buffer, not a copy of the body (asyncio's transport copies whatever it cannot
send at once).
"""

from __future__ import annotations

import asyncio
import weakref
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import structlog
from aiohttp import hdrs, web
from multidict import CIMultiDict, CIMultiDictProxy

from labd.replay.encoding import accepted, encoded, layers, producible
from labd.replay.har import Archive, Key, Response, request_key
from labd.replay.shaping import Shaper

log = structlog.get_logger("labd.replay")

MISS_HEADER = "X-Labd-Replay"
STREAM_OVER = 256 * 1024  # larger bodies go out in slices; smaller ones in one write
SLICE = 64 * 1024


# A client asking for endless new URLs cannot grow the server (or its summary) without end.
MISSES_KEPT = 1000  # distinct missed URLs listed
MISS_TEXT = 2000  # characters of a missed URL kept


@dataclass
class Stats:
    served: int = 0
    misses: Counter[str] = field(default_factory=Counter)
    missed: int = 0  # every miss, listed or not
    errors: int = 0  # clients gone mid-response and the like
    page_missed: int = 0  # misses of the recorded sites' pages and resources (page_miss)
    last_page_miss: str = ""

    def miss(self, what: str, of_page: bool = True) -> None:
        self.missed += 1
        what = what if len(what) <= MISS_TEXT else what[:MISS_TEXT] + "..."
        if of_page:
            self.page_missed += 1
            self.last_page_miss = what
        if what in self.misses or len(self.misses) < MISSES_KEPT:
            self.misses[what] += 1

    def tally(self) -> dict[str, Any]:
        """The counts so far, asked for while serving (SIGUSR1): a job's runner tells each
        iteration's misses from the one before."""
        return {
            "served": self.served,
            "missed": self.missed,
            "page_missed": self.page_missed,
            "last_page_miss": self.last_page_miss,
        }

    def summary(self) -> dict[str, Any]:
        return {
            "served": self.served,
            "missed": self.missed,
            "page_missed": self.page_missed,
            "misses": [{"url": url, "count": n} for url, n in self.misses.most_common()],
            "misses_not_listed": self.missed - sum(self.misses.values()),
            "client_errors": self.errors,
        }


@dataclass(frozen=True)
class _Prepared:
    status: int
    reason: str
    headers: CIMultiDictProxy[str]
    body: bytes


@dataclass(frozen=True)
class _Choices:
    """One recorded response as it can be sent: decoded, and encoded again in its recorded
    coding when that can be produced here."""

    plain: _Prepared
    coding: str = ""
    encoded: _Prepared | None = None

    def for_client(self, accept_encoding: str) -> _Prepared:
        if self.encoded is not None and set(layers(self.coding)) <= accepted(accept_encoding):
            return self.encoded
        return self.plain


class ReplayHandler:
    def __init__(self, archive: Archive, shaper: Shaper) -> None:
        self.archive = archive
        self.shaper = shaper
        self.stats = Stats()
        self.prepared = {key: _prepare(r) for key, r in archive.responses.items()}
        for key, r in archive.responses.items():  # a HEAD's lengths: those its GET is sent
            if r.length is not None:
                get = self.prepared.get(("GET", *key[1:]))
                self.prepared[key] = _head(r, get)
        self.sites = {key[2] for key in self.prepared}  # the authorities recorded
        self.seen: weakref.WeakSet[Any] = weakref.WeakSet()  # connections already set up

    async def __call__(self, request: web.BaseRequest) -> web.StreamResponse:
        url = request_url(request)
        key = request_key(request.method, url, self.archive.ignore_params)
        found = self._find(key)
        shaper = self.shaper
        if shaper.profile.shaped:
            await self._shape_request(request)
        if found is None:
            self.stats.miss(f"{request.method} {url}", self._of_page(key))
            return web.Response(
                status=404,
                text=f"not in the archive: {request.method} {url}\n",
                headers={MISS_HEADER: "miss"},
            )
        self.stats.served += 1
        chosen = found.for_client(request.headers.get("Accept-Encoding", ""))
        if request.method == "HEAD":
            if shaper.down is not None:
                await shaper.down.take(512)  # the status line and headers, roughly
            return _whole(chosen)  # aiohttp sends its Content-Length, not the body
        if shaper.down is None and len(chosen.body) <= STREAM_OVER:
            return _whole(chosen)
        return await self._sliced(request, chosen)

    def _of_page(self, key: Key) -> bool:
        """Whether a miss is of the page: a recorded site's, not a browser's own request (an
        update or clock check to a site never recorded, the tab's /favicon.ico)."""
        return key[2] in self.sites and key[3] != "/favicon.ico"

    def _find(self, key: Key) -> _Choices | None:
        """The recording for `key`; for a HEAD recorded only as a GET, the GET's."""
        found = self.prepared.get(key)
        if found is None and key[0] == "HEAD":
            found = self.prepared.get(("GET", *key[1:]))
        return found

    async def _shape_request(self, request: web.BaseRequest) -> None:
        """The request's side of the link: connection set-up once, upload pacing, the round trip."""
        shaper = self.shaper
        delay = shaper.exchange_delay()
        transport = request.transport
        if transport is not None and transport not in self.seen:
            self.seen.add(transport)
            delay += shaper.connect_delay(tls=transport.get_extra_info("sslcontext") is not None)
        if shaper.up is not None and request.can_read_body:
            size = shaper.up.chunk_size()
            while chunk := await request.content.read(size):
                await shaper.up.take(len(chunk))
        if delay > 0:
            await asyncio.sleep(delay)

    async def _sliced(self, request: web.BaseRequest, found: _Prepared) -> web.StreamResponse:
        """The body in slices of the shared copy, paced by the downlink when one is shaped;
        each write waits until the client has drained the one before (aiohttp's drain)."""
        link = self.shaper.down
        kind = web.StreamResponse if hdrs.CONTENT_TYPE in found.headers else _UntypedStream
        response = kind(status=found.status, reason=found.reason or None, headers=found.headers)
        response.content_length = len(found.body)
        try:
            if link is not None:
                await link.take(512)  # the status line and headers, roughly
            await response.prepare(request)
            size = link.chunk_size() if link is not None else SLICE
            view = memoryview(found.body)
            for start in range(0, len(view), size):
                chunk = view[start : start + size]
                if link is not None:
                    await link.take(len(chunk))
                await response.write(chunk)
            await response.write_eof()
        except ConnectionError:
            # The client went away (a closed tab, a load generator's end): counted, and the
            # answer handed back as it is, which aiohttp closes without logging a server error.
            self.stats.errors += 1
        except asyncio.CancelledError:
            self.stats.errors += 1
            raise
        return response


def request_url(request: web.BaseRequest) -> str:
    url = request.url  # absolute-form through a proxy, else built from the Host header
    if request.transport is not None and request.transport.get_extra_info("sslcontext") is not None:
        url = url.with_scheme("https")
    return str(url)


class _UntypedStream(web.StreamResponse):
    """A response sent without a Content-Type, as its origin sent it (RFC 9110 lets a sender
    leave it out, and the browser then looks at the body). aiohttp would add
    application/octet-stream to any body: a browser downloads a page served so instead of
    showing it. Its default is set in _prepare_headers, the one place to take it back."""

    async def _prepare_headers(self) -> None:
        await super()._prepare_headers()
        self.headers.popall(hdrs.CONTENT_TYPE, None)


class _Untyped(_UntypedStream, web.Response):
    """A whole body without a Content-Type (see _UntypedStream)."""


def _whole(prepared: _Prepared) -> web.Response:
    kind = web.Response if hdrs.CONTENT_TYPE in prepared.headers else _Untyped
    return kind(
        status=prepared.status,
        reason=prepared.reason or None,
        headers=prepared.headers,
        body=prepared.body,
    )


def _prepare(response: Response) -> _Choices:
    """Encoded once, at load: not again for every request. An empty body stays as it is
    (a redirect, a 304)."""
    headers: CIMultiDict[str] = CIMultiDict(response.headers)
    plain = _Prepared(response.status, response.reason, CIMultiDictProxy(headers), response.body)
    coding = response.encoding
    body = encoded(response.body, coding) if coding and response.body else None
    if body is None:  # none recorded, or one this machine cannot produce: identity
        return _Choices(plain)
    headers = headers.copy()
    headers["Content-Encoding"] = ", ".join(layers(coding))
    return _Choices(
        plain,
        coding,
        _Prepared(response.status, response.reason, CIMultiDictProxy(headers), body),
    )


def _head(response: Response, get: _Choices | None) -> _Choices:
    """A HEAD recorded as such, with the Content-Length its origin sent (the size a GET would
    get, in the recorded coding): sent again, under that coding to a client that accepts it.
    A client that does not gets neither: the length of the body decoded is not known. When its
    GET is recorded too, the lengths are those of what replay sends for that GET (encoded again
    at replay's own level: the origin's gzip at level 9 was 141 bytes of 50,903 shorter)."""
    coding = response.encoding
    length = {coding: str(response.length)}  # by the coding a client is sent
    if not producible(coding):
        coding, length = "", {}  # replay's GET would not be sent in it either: neither header
    if get is not None:
        length = {"": str(len(get.plain.body))}
        if get.encoded is not None:
            length[get.coding] = str(len(get.encoded.body))

    def sent(coding: str) -> _Prepared:
        framed: CIMultiDict[str] = CIMultiDict(response.headers)
        if coding in length:
            framed["Content-Length"] = length[coding]
            if coding:
                framed["Content-Encoding"] = ", ".join(layers(coding))
        return _Prepared(response.status, response.reason, CIMultiDictProxy(framed), b"")

    return _Choices(sent(""), coding, sent(coding)) if coding else _Choices(sent(""))
