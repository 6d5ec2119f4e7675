"""The local JSON API on the side port, used by the `labd` command (MQTT is CI's way in).

It listens on loopback by default: whoever can reach it administers this host.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from labd.errors import InvalidSpec
from labd.model import AdminState, Job, JobState
from labd.pool import Pool
from labd.results import history_view, results_view
from labd.scheduler import JobService, Scheduler
from labd.store import JobConflict, Store

MAX_BODY = 256 * 1024


def job_view(job: Job) -> dict[str, Any]:
    return job.model_dump(mode="json")


class Api:
    def __init__(self, store: Store, jobs: JobService, scheduler: Scheduler, pool: Pool) -> None:
        self.store, self.jobs, self.scheduler, self.pool = store, jobs, scheduler, pool

    def routes(self) -> list[web.RouteDef]:
        return [
            web.post("/api/v1/jobs", self.submit),
            web.get("/api/v1/jobs", self.list_jobs),
            web.get("/api/v1/jobs/{id}", self.show_job),
            web.post("/api/v1/jobs/{id}/cancel", self.cancel_job),
            web.get("/api/v1/jobs/{id}/results", self.results),
            web.get("/api/v1/history", self.history),
            web.get("/api/v1/devices", self.list_devices),
            web.get("/api/v1/devices/{id}", self.show_device),
            web.post("/api/v1/devices/{id}/{action}", self.device_action),
        ]

    async def submit(self, request: web.Request) -> web.Response:
        if (request.content_length or 0) > MAX_BODY:
            return _error(413, [f"request body over {MAX_BODY} bytes"])
        try:
            body = json.loads(await request.read())
        except (ValueError, UnicodeDecodeError) as e:
            return _error(400, [f"request body is not JSON: {e}"])
        if not isinstance(body, dict) or not isinstance(body.get("spec"), dict):
            return _error(400, ['request body must be {"spec": {...}, "id": ..., "source": ...}'])
        source = str(body.get("source") or "request")
        try:
            job, created = await self.jobs.submit(
                body["spec"], source, str(body.get("id") or ""), str(body.get("submitter") or "")
            )
        except InvalidSpec as e:
            return _error(400, e.problems)
        except JobConflict as e:
            return _error(409, [str(e)])
        return web.json_response(
            {"job": job_view(job), "created": created}, status=201 if created else 200
        )

    async def list_jobs(self, request: web.Request) -> web.Response:
        try:
            states = [JobState(s) for s in request.query.getall("state", [])]
            limit = int(request.query.get("limit", "100"))
        except ValueError as e:
            return _error(400, [str(e)])
        jobs = await self.store.list_jobs(states, limit=limit)
        return web.json_response({"jobs": [job_view(j) for j in jobs]})

    async def show_job(self, request: web.Request) -> web.Response:
        job = await self.store.get_job(request.match_info["id"])
        if job is None:
            return _error(404, [f"no job {request.match_info['id']!r}"])
        view = job_view(job)
        if job.state is JobState.QUEUED:
            view["waiting"] = await self.jobs.why_waiting(job)
        iterations = await self.store.iterations(job.id, attempt=job.attempts)
        view["iterations_done"] = len(iterations)
        view["iterations_total"] = job.spec.planned_iterations()
        return web.json_response({"job": view})

    async def cancel_job(self, request: web.Request) -> web.Response:
        job = await self.scheduler.cancel(request.match_info["id"])
        if job is None:
            return _error(404, [f"no job {request.match_info['id']!r}"])
        return web.json_response({"job": job_view(job)})

    async def results(self, request: web.Request) -> web.Response:
        job = await self.store.get_job(request.match_info["id"])
        if job is None:
            return _error(404, [f"no job {request.match_info['id']!r}"])
        return web.json_response(await results_view(self.store, job))

    async def history(self, request: web.Request) -> web.Response:
        suite, test = request.query.get("suite", ""), request.query.get("test", "")
        if not suite or not test:
            return _error(400, ["history needs ?suite=...&test=..."])
        return web.json_response(await history_view(self.store, suite, test))

    async def list_devices(self, _: web.Request) -> web.Response:
        devices = await self.store.list_devices()
        return web.json_response({"devices": [d.model_dump(mode="json") for d in devices]})

    async def show_device(self, request: web.Request) -> web.Response:
        device = await self.store.get_device(request.match_info["id"])
        if device is None:
            return _error(404, [f"no device {request.match_info['id']!r}"])
        view = device.model_dump(mode="json")
        view["job"] = await self.store.active_job_on(device.id)
        return web.json_response({"device": view})

    async def device_action(self, request: web.Request) -> web.Response:
        actions = {
            "drain": AdminState.DRAINING,
            "enable": AdminState.ENABLED,
            "maintenance": AdminState.MAINTENANCE,
        }
        action = request.match_info["action"]
        if action not in actions:
            return _error(404, [f"unknown device action {action!r} (drain, enable, maintenance)"])
        device = await self.pool.set_admin(request.match_info["id"], actions[action])
        if device is None:
            return _error(404, [f"no device {request.match_info['id']!r}"])
        self.scheduler.wake()
        return web.json_response({"device": device.model_dump(mode="json")})


def _error(status: int, problems: list[str]) -> web.Response:
    return web.json_response({"errors": problems}, status=status)
