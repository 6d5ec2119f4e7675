"""The lab at a glance: devices (with why one is out and the admin's buttons), the queue (why
each job waits), the running jobs (progress pushed live) and the latest jobs."""

from __future__ import annotations

from html import escape

from aiohttp import web

from labd.auth import Action
from labd.console.layout import form, job_link, page, state, table, when
from labd.daemon.api import Api
from labd.daemon.guard import CALLER
from labd.model import AdminState, Device, DeviceState, Job, JobState
from labd.store import fleet_devices

QUEUE_SHOWN = 200  # queued jobs explained on the page (each costs a look at the devices)
JOBS_SHOWN = 100


class LabPages:
    def __init__(self, api: Api) -> None:
        self.api = api

    async def home(self, _: web.Request) -> web.Response:
        raise web.HTTPSeeOther("/console/devices")

    async def devices(self, request: web.Request) -> web.Response:
        store = self.api.store
        admin = request[CALLER].principal.may(Action.ADMINISTER)
        rows = []
        for device in await fleet_devices(store):
            running = await store.active_job_on(device.id)
            rows.append(
                f"<tr id='device-{escape(device.id)}'><td>{escape(device.id)}</td>"
                f"<td>{escape(device.platform)} {escape(device.model)}</td>"
                f"<td>{escape(device.host)}</td><td>{state(device.state.value)}</td>"
                f"<td>{escape(device.admin.value)}</td><td>{_health(device)}</td>"
                f"<td>{job_link(running) if running else '-'}</td>"
                + (f"<td>{_device_buttons(device, request)}</td>" if admin else "")
                + "</tr>"
            )
        head = ["device", "platform", "host", "state", "admin", "health", "job"]
        body = table(head + (["act"] if admin else []), rows, "No device is known yet.")
        return page(request, "Devices", body, "devices")

    async def queue(self, request: web.Request) -> web.Response:
        jobs, queued = await self.api.store.queued_in_run_order(QUEUE_SHOWN)
        rows = []
        for job in jobs:
            why = await self.api.jobs.why_waiting(job)
            rows.append(
                f"<tr><td>{job_link(job.id)}</td><td>{_test(job)}</td>"
                f"<td>{job.spec.priority}</td><td>{escape(job.submitter)}</td>"
                f"<td>{when(job.submitted_at)}</td><td class='why'>{escape(why)}</td></tr>"
            )
        head = ["job", "test", "priority", "submitter", "submitted", "why it waits"]
        more = (
            f"<p class='note'>{queued:,} jobs are queued; the first {len(jobs)} to run are"
            " shown.</p>"
            if queued > len(jobs)
            else ""
        )
        return page(request, "Queue", table(head, rows, "Nothing is waiting.") + more, "queue")

    async def running(self, request: web.Request) -> web.Response:
        store = self.api.store
        jobs = await store.list_jobs([JobState.LEASED, JobState.RUNNING], JOBS_SHOWN)
        rows = []
        for job in jobs:
            done = await store.count_iterations(job.id, job.attempts)
            rows.append(
                f"<tr data-job='{escape(job.id)}'><td>{job_link(job.id)}</td><td>{_test(job)}</td>"
                f"<td>{escape(job.device_id)}</td><td class='state-cell'>"
                f"{state(job.state.value)}</td><td>{when(job.started_at)}</td>"
                f"<td>{progress(done, job.spec.planned_iterations())}</td></tr>"
            )
        head = ["job", "test", "device", "state", "started", "progress"]
        body = table(head, rows, "No job is running.", css="live")
        body += "<p class='note' id='live-status'>Progress follows the lab as it happens.</p>"
        return page(request, "Running", body, "running", live=True)

    async def jobs(self, request: web.Request) -> web.Response:
        states, problem = _states(request.query.getall("state", []))
        jobs = await self.api.store.list_jobs(states, JOBS_SHOWN)
        rows = [
            f"<tr><td>{job_link(job.id)}</td><td>{_test(job)}</td>"
            f"<td>{escape(job.spec.build.revision or '-')}</td><td>{state(job.state.value)}</td>"
            f"<td>{escape(job.device_id or '-')}</td><td>{when(job.finished_at)}</td>"
            f"<td class='note'>{escape(job.error)}</td></tr>"
            for job in jobs
        ]
        head = ["job", "test", "revision", "state", "device", "finished", "error"]
        shown = ", ".join(s.value for s in states)
        body = (
            (f"<p class='finding'>{escape(problem)}</p>" if problem else "")
            + (f"<p class='note'>Only jobs {escape(shown)}.</p>" if states else "")
            + table(head, rows, "No job yet.")
        )
        return page(request, "Latest jobs", body, "jobs")

    async def device_action(self, request: web.Request) -> web.StreamResponse:
        status, problem, _ = await self.api.device_as(
            request[CALLER], request.match_info["id"], request.match_info["action"]
        )
        if status != 200:
            return web.Response(status=status, text=problem + "\n")
        raise web.HTTPSeeOther("/console/devices")


def _states(asked: list[str]) -> tuple[list[JobState], str]:
    """The job states ?state=S (repeated, or comma-separated) asks for, and what was not a
    state (left out of the filter, and the page says so)."""
    names = [name.strip() for value in asked for name in value.split(",") if name.strip()]
    known = {s.value: s for s in JobState}
    states = [known[name] for name in dict.fromkeys(names) if name in known]
    unknown = [name for name in names if name not in known]
    if not unknown:
        return states, ""
    outcome = "left out of the filter" if states else "every job is shown"
    problem = (
        f"?state={','.join(unknown)}: no such job state (the states are "
        f"{', '.join(known)}); {outcome}."
    )
    return states, problem


def progress(done: int, total: int) -> str:
    """A progress bar the live script moves: iterations done of the planned total."""
    return (
        f"<progress value='{done}' max='{max(total, 1)}'></progress> "
        f"<span class='count'>{done}</span>/{total}"
    )


def _test(job: Job) -> str:
    spec = job.spec
    return (
        f"<a href='/console/history?suite={escape(spec.suite)}&amp;test={escape(spec.test)}'>"
        f"{escape(spec.suite)}/{escape(spec.test)}</a>"
    )


def _health(device: Device) -> str:
    """Why the device is out, in words, and how many health checks failed in a row."""
    out = []
    if device.state in (DeviceState.QUARANTINED, DeviceState.OFFLINE) and device.reason:
        out.append(f"<span class='reason'>{escape(device.reason)}</span>")
    elif device.reason:
        out.append(escape(device.reason))
    if device.consecutive_failures:
        out.append(f"{device.consecutive_failures} failed check(s) in a row")
    if device.state is DeviceState.QUARANTINED:
        out.append("an administrator must enable it")
    return "; ".join(out) or "ok"


def _device_buttons(device: Device, request: web.Request) -> str:
    base = f"/console/devices/{device.id}"
    buttons = []
    if device.admin is AdminState.ENABLED and device.state is not DeviceState.QUARANTINED:
        buttons.append(form(f"{base}/drain", "Drain", request))
    else:
        buttons.append(form(f"{base}/enable", "Enable", request))
    return "".join(buttons)
