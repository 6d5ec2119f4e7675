"""The JSON API (/api/v1), used by the `labd` command and remote tools (MQTT is CI's way in).

Every request has passed the guard (`labd.daemon.guard`): it carries a principal whose role
allows the route's action. Here: whose job may be cancelled, who the submitter is (always the
principal, never a body field), secrets redacted in every answer, each write audited, and
heavy answers paged, computed off the event loop and bounded in number.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import structlog
from aiohttp import web
from pydantic import ValidationError
from sqlalchemy.exc import SQLAlchemyError

from labd.auth import Action, Audit, Principals, redact_job
from labd.config import HttpSettings
from labd.daemon.artefact_routes import ArtefactRoutes
from labd.daemon.guard import CALLER, CHANNEL, WILDCARDS, ApiGuard, Caller, allowed_host_names
from labd.daemon.heavy import HeavyQueries, heavy_answer
from labd.daemon.query import int_query, job_named, states_query
from labd.errors import AuthError, InvalidSpec, UsageError
from labd.model import AdminState, Device, Job, JobState, id_problem
from labd.mqtt import ApiSubmission
from labd.pool import Pool
from labd.scheduler import JobService, Scheduler
from labd.store import (
    HISTORY_PAGE,
    RESULTS_PAGE,
    JobConflict,
    Store,
    StoreError,
    fleet_device,
    fleet_devices,
    history_page,
    out_of_space,
    raw_values_removed,
    results_page,
    storage_problem,
)
from labd.validation import TOO_DEEP, describe_errors, too_deep

log = structlog.get_logger("labd.api")

MAX_BODY = 256 * 1024
TOO_LARGE = (
    f"request body over {MAX_BODY:,} bytes, the API's limit (a manifest's spec must fit in it, "
    "as over MQTT in [mqtt] max_payload_bytes: make its params smaller)"
)
MAX_LIST = 1000
DEVICE_ACTIONS = {
    "drain": AdminState.DRAINING,
    "enable": AdminState.ENABLED,
    "maintenance": AdminState.MAINTENANCE,
}
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def api_application(api: Api, principals: Principals, settings: HttpSettings) -> web.Application:
    """The API as an aiohttp application behind its guard."""
    guard = ApiGuard(
        principals,
        api.audit,
        allowed_host_names([settings.host, settings.api_host], settings.allowed_hosts),
        api.actions(),
        any_ip_literal=settings.api_host in WILDCARDS - {""},
    )
    app = web.Application(
        middlewares=[guard.middleware, store_unavailable], client_max_size=MAX_BODY
    )
    app.add_routes(api.routes())
    return app


@web.middleware
async def store_unavailable(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The database away or the disk full: a 503 that says which, not a bare 500; a body over
    the limit, a 413 as the API words it."""
    try:
        return await handler(request)
    except web.HTTPRequestEntityTooLarge:  # a chunked body has no length to check beforehand
        return _error(413, [TOO_LARGE])
    except Exception as e:
        # ConnectionError: asyncpg's refused connection reaches us unwrapped.
        database = isinstance(e, StoreError | SQLAlchemyError | ConnectionError)
        if not database and not out_of_space(e):
            raise
        problem = storage_problem(e)
        log.warning("api request not handled", path=request.path, problem=problem, error=repr(e))
        return web.json_response(
            {"errors": [f"{problem}; nothing was done, send it again"], "reason": "unavailable"},
            status=503,
            headers={"Retry-After": "30"},
        )


def job_view(job: Job) -> dict[str, Any]:
    return redact_job(job.model_dump(mode="json"))


class Api:
    def __init__(
        self,
        store: Store,
        jobs: JobService,
        scheduler: Scheduler,
        pool: Pool,
        audit: Audit,
        heavy: HeavyQueries,
        artefacts: ArtefactRoutes | None = None,
    ) -> None:
        self.store, self.jobs, self.scheduler, self.pool = store, jobs, scheduler, pool
        self.audit, self.heavy, self.artefacts = audit, heavy, artefacts

    def table(self) -> list[tuple[str, str, Handler, Action]]:
        """Every route: method, path, handler and the action a principal's role must allow."""
        read, v1 = Action.READ, "/api/v1"
        return [
            ("POST", f"{v1}/jobs", self.submit, Action.SUBMIT),
            ("GET", f"{v1}/jobs", self.list_jobs, read),
            ("GET", f"{v1}/jobs/{{id}}", self.show_job, read),
            ("POST", f"{v1}/jobs/{{id}}/cancel", self.cancel_job, Action.CANCEL),
            ("GET", f"{v1}/jobs/{{id}}/results", self.results, read),
            ("GET", f"{v1}/jobs/{{id}}/perfherder", self.perfherder, read),
            ("GET", f"{v1}/history", self.history, read),
            ("GET", f"{v1}/devices", self.list_devices, read),
            ("GET", f"{v1}/devices/{{id}}", self.show_device, read),
            ("POST", f"{v1}/devices/{{id}}/{{action}}", self.device_action, Action.ADMINISTER),
            *(self.artefacts.table() if self.artefacts else []),
        ]

    def routes(self) -> list[web.RouteDef]:
        return [web.route(method, path, handler) for method, path, handler, _ in self.table()]

    def actions(self) -> Mapping[tuple[str, str], Action]:
        table = self.table()
        # aiohttp answers HEAD on every GET route: the same action decides.
        heads = {("HEAD", path): action for method, path, _, action in table if method == "GET"}
        return heads | {(method, path): action for method, path, _, action in table}

    # Writes ---------------------------------------------------------------------------------

    async def submit(self, request: web.Request) -> web.Response:
        caller = request[CALLER]

        def refuse(status: int, problems: list[str], reason: str) -> web.Response:
            # Audited and counted as MQTT's refusals are (a flood of bad bodies was unseen).
            self._refused(caller, Action.SUBMIT, "new job", reason, "; ".join(problems))
            return _error(status, problems)

        if (request.content_length or 0) > MAX_BODY:
            return refuse(413, [TOO_LARGE], "too_large")
        try:
            body = json.loads(await request.read())
        except (ValueError, UnicodeDecodeError) as e:
            return refuse(400, [f"request body is not JSON: {e}"], "malformed")
        except RecursionError:
            return refuse(400, [f"request body is {TOO_DEEP}"], "malformed")
        if too_deep(body):  # the same limit as MQTT's, before anything recursive meets it
            return refuse(400, [f"request body is {TOO_DEEP}"], "malformed")
        if not isinstance(body, dict):
            shape = 'request body must be {"spec": {...}, "id": ..., "source": ...}'
            return refuse(400, [shape], "malformed")
        try:  # the rules of MQTT's SubmitRequest: no unknown key, each field of its type
            submission = ApiSubmission.model_validate(body)
        except ValidationError as e:
            problems = [_cut(p) for p in describe_errors(e, ApiSubmission, "request")]
            return refuse(400, problems, "invalid")
        name = caller.principal.name
        if submission.submitter not in (None, "", name):
            return refuse(
                400,
                [
                    f"submitter: the API's submitter is the authenticated principal ({name!r}), "
                    "not a body field; leave it out"
                ],
                "invalid",
            )
        job_id = submission.id
        self._allowed(caller, Action.SUBMIT, job_id or "new job")
        source = submission.source or "request"
        try:
            # The one submit path checks the principal's rate limit, scenarios and quota.
            job, created = await self.jobs.submit(
                body["spec"], source, job_id, principal=caller.principal
            )
        except AuthError as e:
            self._refused(caller, Action.SUBMIT, job_id or "new job", e.reason, str(e))
            if e.reason == "rate_limited":
                return _error(429, [str(e)], {"Retry-After": "60"}, e.reason)
            if e.reason == "quota_exceeded":
                return _error(400, [str(e)], reason=e.reason)
            return _error(403, [str(e)], reason=e.reason)
        except InvalidSpec as e:
            return refuse(400, e.problems, "invalid_spec")
        except JobConflict as e:
            return refuse(409, [str(e)], "conflict")
        return web.json_response(
            {"job": job_view(job), "created": created}, status=201 if created else 200
        )

    async def cancel_job(self, request: web.Request) -> web.Response:
        status, problem, job = await self.cancel_as(request[CALLER], request.match_info["id"])
        if job is None:
            return _error(status, [problem], reason="forbidden" if status == 403 else None)
        return web.json_response({"job": job_view(job)})

    async def cancel_as(self, caller: Caller, job_id: str) -> tuple[int, str, Job | None]:
        """Cancel `job_id` for `caller` if its principal may (audited): the cancelled job, or
        an HTTP status and the problem. Shared by the API and the console."""
        if problem := id_problem(job_id, "job id"):
            return 400, problem, None
        job = await self.store.get_job(job_id)
        if job is None:
            return 404, f"no job {job_id!r}", None
        if not caller.principal.may_cancel(job.submitter):
            message = (
                f"principal {caller.principal.name!r} may not cancel job {job_id!r} "
                f"(submitted by {job.submitter!r})"
            )
            self._refused(caller, Action.CANCEL, job_id, "forbidden", message)
            return 403, message, None
        self._allowed(caller, Action.CANCEL, job_id)
        cancelled = await self.scheduler.cancel(job_id)
        if cancelled is None:
            return 404, f"no job {job_id!r}", None
        return 200, "", cancelled

    async def device_action(self, request: web.Request) -> web.Response:
        caller, device_id = request[CALLER], request.match_info["id"]
        status, problem, device = await self.device_as(
            caller, device_id, request.match_info["action"]
        )
        if device is None:
            return _error(status, [problem])
        return web.json_response({"device": device.model_dump(mode="json")})

    async def device_as(
        self, caller: Caller, device_id: str, action: str
    ) -> tuple[int, str, Device | None]:
        """Drain, enable or maintain a device for an administrator (audited): the device, or
        an HTTP status and the problem. Shared by the API and the console."""
        if problem := id_problem(device_id, "device id"):
            return 400, problem, None
        if action not in DEVICE_ACTIONS:
            return 404, f"unknown device action {action!r} (drain, enable, maintenance)", None
        self._allowed(caller, Action.ADMINISTER, f"device {device_id} {action}")
        device = await self.pool.set_admin(device_id, DEVICE_ACTIONS[action])
        if device is None:
            return 404, f"no device {device_id!r}", None
        self.scheduler.wake()
        return 200, "", device

    def _allowed(self, caller: Caller, action: Action, target: str) -> None:
        self.audit.allowed(CHANNEL, caller.principal.name, action.value, target, caller.source)

    def _refused(
        self, caller: Caller, action: Action, target: str, reason: str, detail: str
    ) -> None:
        self.audit.refused(
            CHANNEL, caller.principal.name, action.value, target, caller.source, reason, detail
        )

    # Reads ----------------------------------------------------------------------------------

    async def list_jobs(self, request: web.Request) -> web.Response:
        try:
            states = states_query(request)
            limit = int_query(request, "limit", 100, 1, MAX_LIST)
        except ValueError as e:
            return _error(400, [str(e)])
        jobs = await self.store.list_jobs(states, limit=limit)
        return web.json_response({"jobs": [job_view(j) for j in jobs]})

    async def show_job(self, request: web.Request) -> web.Response:
        job = await job_named(self.store, request)
        if not isinstance(job, Job):
            return job
        view = job_view(job)
        if job.state is JobState.QUEUED:
            view["waiting"] = await self.jobs.why_waiting(job)
        view["iterations_done"] = done = await self.store.count_iterations(job.id, job.attempts)
        view["iterations_total"] = job.spec.planned_iterations()
        if not done and (removed := await raw_values_removed(self.store, job)):
            view["raw_values_removed"] = removed  # 0 done would read as nothing ran
        return web.json_response({"job": view})

    async def results(self, request: web.Request) -> web.Response:
        try:
            offset = int_query(request, "offset", 0, 0, 2**31)
            limit = int_query(request, "limit", RESULTS_PAGE, 1, 2**31)
        except ValueError as e:
            return _error(400, [str(e)])
        job = await job_named(self.store, request)
        if not isinstance(job, Job):
            return job
        who = request[CALLER].principal.name
        return await heavy_answer(self.heavy, who, lambda: self._results_page(job, offset, limit))

    async def perfherder(self, request: web.Request) -> web.Response:
        """The job's PERFHERDER_DATA payload by this daemon's settings, as its job.log has it;
        409 for a job that did not succeed or whose results Perfherder would not take."""
        job = await job_named(self.store, request)
        if not isinstance(job, Job):
            return job

        async def view() -> dict[str, Any]:
            return {"perfherder": await self.jobs.perfherder_export(job)}

        try:
            return await heavy_answer(self.heavy, request[CALLER].principal.name, view)
        except UsageError as e:
            return _error(409, [str(e)])

    async def _results_page(self, job: Job, offset: int, limit: int) -> dict[str, Any]:
        page = await results_page(self.store, job, offset, limit)
        if offset == 0 and self.artefacts is not None:  # the first page, as the summary
            # The listing's first page, and how many files in all (the rest: its own route).
            listing = await self.artefacts.listing(job)
            page["artefacts"], page["artefacts_total"] = listing["artefacts"], listing["total"]
        return page

    async def history(self, request: web.Request) -> web.Response:
        suite, test = request.query.get("suite", ""), request.query.get("test", "")
        if not suite or not test:
            return _error(400, ["history needs ?suite=...&test=..."])
        before = request.query.get("before", "")
        named = [("suite", suite), ("test", test)] + ([("before", before)] if before else [])
        if problems := [p for what, value in named if (p := id_problem(value, what))]:
            return _error(400, problems)
        try:
            limit = int_query(request, "limit", HISTORY_PAGE, 1, 2**31)
        except ValueError as e:
            return _error(400, [str(e)])
        if before and await self.store.get_job(before) is None:
            return _error(400, [f"before: no job {before!r}"])
        who = request[CALLER].principal.name
        return await heavy_answer(
            self.heavy, who, lambda: history_page(self.store, suite, test, limit, before)
        )

    async def list_devices(self, _: web.Request) -> web.Response:
        devices = await fleet_devices(self.store)
        return web.json_response({"devices": [d.model_dump(mode="json") for d in devices]})

    async def show_device(self, request: web.Request) -> web.Response:
        device_id = request.match_info["id"]
        if problem := id_problem(device_id, "device id"):
            return _error(400, [problem])
        device = await fleet_device(self.store, device_id)
        if device is None:
            return _error(404, [f"no device {device_id!r}"])
        view = device.model_dump(mode="json")
        view["job"] = await self.store.active_job_on(device.id)
        # The scenarios its driver offers, where this host runs that driver (another host's
        # are that host's to say): what a job for it may name.
        driver = self.pool.drivers.get(device.driver) if device.host == self.pool.host else None
        view["scenarios"] = sorted(driver.scenarios()) if driver is not None else None
        return web.json_response({"device": view})


def _cut(problem: str, limit: int = 1000) -> str:
    """A problem that quotes the input (a 10,000-character id) cut to a readable length."""
    return problem if len(problem) <= limit else problem[:limit] + "..."


def _error(
    status: int,
    problems: list[str],
    headers: dict[str, str] | None = None,
    reason: str | None = None,
) -> web.Response:
    """The errors, and for a refusal its reason as the guard gives it (`forbidden`,
    `rate_limited`, ...) so a client can tell a refusal from a failure without parsing text."""
    body: dict[str, Any] = {"errors": problems}
    if reason:
        body["reason"] = reason
    return web.json_response(body, status=status, headers=headers)
