"""The API's artefact routes: a job's files listed and served (Range requests included, so a
browser's video player can seek), and a retention pass on demand.

They stand behind the same guard as every API route: any role may read, only an admin may
run a pass. A malformed id or path is a 400, a link a 403, a file that is not here a 404 that
says where the job ran.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import hdrs, web
from aiohttp.abc import AbstractStreamWriter
from multidict import CIMultiDict

from labd.artefacts import (
    ARTEFACTS_PAGE,
    ARTEFACTS_PAGE_MAX,
    INLINE,
    ArtefactError,
    ArtefactKeeper,
    api_path,
    artefact_page,
    content_type,
    encoded_separator,
    open_artefact,
    path_problem,
)
from labd.auth import Action, Audit
from labd.daemon.guard import CALLER, CHANNEL
from labd.daemon.heavy import HeavyQueries, heavy_answer
from labd.daemon.query import int_query, job_named
from labd.daemon.ranges import range_to_honour
from labd.model import Job, id_problem
from labd.store import Store
from labd.validation import TOO_DEEP, did_you_mean
from labd.visible import quoted

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
V1 = "/api/v1"


class ArtefactRoutes:
    """The routes, and the listing the first results page shares."""

    def __init__(
        self,
        store: Store,
        keeper: ArtefactKeeper,
        host: str,
        audit: Audit,
        base_url: str = "",
        heavy: HeavyQueries | None = None,
    ) -> None:
        self.store, self.keeper, self.host, self.audit = store, keeper, host, audit
        self.jobs_dir: Path = keeper.jobs_dir
        self.base_url = base_url
        # Listings take turns with the results and history queries (the API's bound).
        self.heavy = heavy or HeavyQueries(2, 8)

    def table(self) -> list[tuple[str, str, Handler, Action]]:
        read = Action.READ
        one = f"{V1}/jobs/{{id}}/artefacts/{{name:.+}}"
        return [
            ("GET", f"{V1}/jobs/{{id}}/artefacts", self.list_job, read),
            ("GET", one, self.serve, read),
            ("POST", f"{V1}/artefacts/gc", self.gc, Action.ADMINISTER),
        ]

    async def listing(
        self, job: Job, offset: int = 0, limit: int = ARTEFACTS_PAGE
    ) -> dict[str, Any]:
        """A page of the job's artefacts as the API lists them (name, kind, type, size,
        iteration, variant, `path` on the API and, with `artefacts.base_url`, the full `url`),
        `offset`, `limit`, `total` and `next` (the next page's offset, None on the last).
        The folder is walked, and the page made, in a thread."""
        ran_on = job.lease_owner
        if not ran_on and job.device_id:  # ended (a job's lease owner is cleared when it ends
            # after its host died): the host of the device it ran on
            device = await self.store.get_device(job.device_id)
            ran_on = device.host if device is not None else ""
        return await asyncio.to_thread(self._listing, job, offset, limit, ran_on or self.host)

    def _listing(self, job: Job, offset: int, limit: int, ran_on: str) -> dict[str, Any]:
        page = artefact_page(self.jobs_dir, job.id, offset, limit)
        # `host`: where the listed files are (this host); `ran_on`: the job's last host (a
        # job taken over after a lost lease may have left files of its first attempt here).
        view: dict[str, Any] = {"job_id": job.id, "host": self.host, "ran_on": ran_on}
        view["artefacts"] = []
        for artefact in page.artefacts:
            entry = artefact.as_dict()
            entry["path"] = api_path(job.id, artefact.name)
            if self.base_url:
                entry["url"] = self.base_url + entry["path"]
            view["artefacts"].append(entry)
        view |= {
            "offset": page.offset,
            "limit": max(1, min(limit, ARTEFACTS_PAGE_MAX)),
            "total": page.total,
            "next": page.next,
            "unservable": page.unservable,
        }
        if not page.total and ran_on != self.host:
            view["elsewhere"] = _elsewhere(job)
        return view

    async def list_job(self, request: web.Request) -> web.Response:
        try:
            offset = int_query(request, "offset", 0, 0, 2**31)
            # A larger limit is capped (docs/artefacts.md), however large it is.
            limit = int_query(request, "limit", ARTEFACTS_PAGE, 1, ARTEFACTS_PAGE_MAX, cap=True)
        except ValueError as e:
            return _error(400, [str(e)])
        job = await job_named(self.store, request)
        if not isinstance(job, Job):
            return job
        who = request[CALLER].principal.name
        return await heavy_answer(self.heavy, who, lambda: self.listing(job, offset, limit))

    async def serve(self, request: web.Request) -> web.StreamResponse:
        job_id, name = request.match_info["id"], request.match_info["name"]
        problem = id_problem(job_id, "job id") or encoded_separator(request.raw_path)
        if problem := problem or path_problem(name):
            return _error(400, [problem])
        job = await self.store.get_job(job_id)
        if job is None:
            return _error(404, [f"no job {job_id!r}"])
        try:
            fd, _ = await asyncio.to_thread(open_artefact, self.jobs_dir, job_id, name)
        except ArtefactError as e:
            problem = str(e)
            if e.status == 404 and job.lease_owner not in ("", self.host):
                problem += f"; {_elsewhere(job)}"
            return _error(e.status, [problem])
        kind = content_type(name)
        headers = {
            "Content-Type": kind,
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": "sandbox; default-src 'none'",
            # Kept by the client only, and checked against the ETag before each reuse: the log
            # of a running job grows.
            "Cache-Control": "private, no-cache",
        }
        if kind not in INLINE:
            headers["Content-Disposition"] = f'attachment; filename="{_filename(name)}"'
        return OpenedFile(fd, headers)

    async def gc(self, request: web.Request) -> web.Response:
        caller = request[CALLER]
        try:
            dry_run = gc_request(await request.read())
        except ValueError as e:
            return _error(400, [str(e)])
        if not dry_run:
            self.audit.allowed(
                CHANNEL, caller.principal.name, Action.ADMINISTER.value, "artefacts gc",
                caller.source,
            )  # fmt: skip
        report = await self.keeper.collect(dry_run, asked_by=caller.principal.name)
        return web.json_response(report.as_dict())


GC_BODY = '{"dry_run": true|false}'
SHOWN_KEYS = 5  # unknown keys a refusal names


def gc_request(raw: bytes) -> bool:
    """`dry_run` of a gc request's body, which must be exactly {"dry_run": true|false}: a pass
    deletes files, so that is never what an empty body or a misspelt or mistyped field falls
    back to. ValueError says what is wrong."""
    if not raw.strip():
        raise ValueError(f"request body is empty; send {GC_BODY} (false removes files)")
    try:
        body = json.loads(raw, object_pairs_hook=_no_repeats)
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"request body is not JSON: {e}") from None
    except RecursionError:
        raise ValueError(f"request body is {TOO_DEEP}") from None
    if not isinstance(body, dict):
        raise ValueError(f"request body must be {GC_BODY}")
    if unknown := [key for key in body if key != "dry_run"]:
        named = [f"{quoted(k)}{did_you_mean(k, ['dry_run'])}" for k in unknown[:SHOWN_KEYS]]
        more = f" and {len(unknown) - SHOWN_KEYS} more" if len(unknown) > SHOWN_KEYS else ""
        keys = "key" if len(unknown) == 1 else "keys"
        raise ValueError(f"unknown {keys} {', '.join(named)}{more}; the body is {GC_BODY}")
    if "dry_run" not in body:
        raise ValueError(f"dry_run is missing: send {GC_BODY} (false removes files)")
    if not isinstance(dry_run := body["dry_run"], bool):
        raise ValueError(f"dry_run must be true or false, got {quoted(dry_run)}")
    return dry_run


def _no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose keys are each given once: {"dry_run": true, "dry_run": false} ran a
    real pass (the last one wins in json.loads)."""
    keys = [key for key, _ in pairs]
    if repeated := sorted({key for key in keys if keys.count(key) > 1}):
        raise ValueError(f"key {', '.join(map(quoted, repeated))} given more than once")
    return dict(pairs)


class OpenedFile(web.FileResponse):
    """A file already opened (without following links), sent by aiohttp with Range, ETag and
    sendfile: it opens the file again through the descriptor (/proc/self/fd/N names the very
    file, whatever its path now), and the descriptor is closed once the answer is sent. The
    Range aiohttp acts on is first corrected (`labd.daemon.ranges`)."""

    def __init__(self, fd: int, headers: dict[str, str]) -> None:
        super().__init__(f"/proc/self/fd/{fd}", headers=headers)
        self._fd: int | None = fd

    async def prepare(self, request: web.BaseRequest) -> AbstractStreamWriter | None:
        try:
            if self._fd is not None and hdrs.RANGE in request.headers:
                info = os.fstat(self._fd)
                etag = f"{info.st_mtime_ns:x}-{info.st_size:x}"  # as aiohttp makes it
                request = _with_range(request, etag)
            return await super().prepare(request)
        finally:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def _with_range(request: web.BaseRequest, etag: str) -> web.BaseRequest:
    headers = request.headers
    honoured = range_to_honour(headers.get(hdrs.RANGE), headers.get(hdrs.IF_RANGE), etag)
    if honoured == headers.get(hdrs.RANGE):
        return request
    changed = CIMultiDict(headers)
    changed.popall(hdrs.RANGE, None)
    if honoured is not None:
        changed[hdrs.RANGE] = honoured
    return request.clone(headers=changed)


def _elsewhere(job: Job) -> str:
    return (
        f"job {job.id!r} ran on host {job.lease_owner!r}: its artefacts are kept there "
        "(ask that host's API)"
    )


def _filename(name: str) -> str:
    return name.rsplit("/", 1)[-1].replace('"', "")


def _error(status: int, problems: list[str]) -> web.Response:
    return web.json_response({"errors": problems}, status=status)
