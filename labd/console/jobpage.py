"""One job as a person wants to see it: what it is and where it stands, its figures, values in
iteration order, what was set aside and why, the conditions it ran in, and the evidence (the
video, a filmstrip of the frames where the page changed, the heat map, the progress curve)."""

from __future__ import annotations

import asyncio
from html import escape
from typing import Any

from aiohttp import web

from labd.console.artefacts import ArtefactFiles
from labd.console.evidence import evidence_section
from labd.console.lab import progress
from labd.console.layout import form, job_link, page, state, table, when
from labd.daemon.api import Api
from labd.daemon.guard import CALLER
from labd.daemon.heavy import Busy
from labd.model import Iteration, Job, JobState, id_problem
from labd.report import (
    by_severity,
    comparison_head,
    comparison_rows,
    environment,
    series_plot,
    summaries_table,
    summary_table,
    units_of,
)
from labd.store import compare_variants, measured, removal

ITERATIONS_SHOWN = 500  # iterations a chart draws, and rows a page of the values table holds


class JobPage:
    def __init__(self, api: Api, files: ArtefactFiles) -> None:
        self.api, self.files = api, files

    async def show(self, request: web.Request) -> web.Response:
        job_id = request.match_info["id"]
        if problem := id_problem(job_id, "job id"):  # as the API: the rule, not "no job"
            raise web.HTTPBadRequest(text=f"{problem}\n")
        job = await self.api.store.get_job(job_id)
        if job is None:
            raise web.HTTPNotFound(text=f"no job {job_id!r}\n")
        its: list[Iteration] = []
        problem = ""
        try:
            # Reading and summarising every iteration is a heavy query like the API's results.
            async with self.api.heavy.turn(request[CALLER].principal.name):
                its = await self.api.store.iterations(job.id, attempt=job.attempts)
                offset, problem = _offset(request.query.get("values"), len(its))
                kept = None if its else await self.api.store.job_digest(job.id)
                if kept is not None:
                    figures = _kept_figures(job, kept)
                else:
                    figures = await asyncio.to_thread(_figures, job, its, offset)
        except Busy:
            figures = "<p class='note'>The daemon is busy with other results; reload shortly.</p>"
        body = (
            (f"<p class='finding'>{escape(problem)}</p>" if problem else "")
            + await self._facts(request, job)
            + figures
            + _set_aside(its)
            + await evidence_section(self.files, request.query, job.id)
            + _environment(its)
        )
        title = f"Job {job.id}"
        return page(request, title, body, "jobs", live=not job.state.terminal)

    async def cancel(self, request: web.Request) -> web.StreamResponse:
        job_id, caller = request.match_info["id"], request[CALLER]
        before = None if id_problem(job_id, "job id") else await self.api.store.get_job(job_id)
        if (
            before is not None
            and before.state.terminal
            and caller.principal.may_cancel(before.submitter)
        ):
            return _already_ended(request, before)
        status, problem, _ = await self.api.cancel_as(caller, job_id)
        if status != 200:
            return web.Response(status=status, text=problem + "\n")
        raise web.HTTPSeeOther(f"/console/jobs/{job_id}")

    async def _facts(self, request: web.Request, job: Job) -> str:
        spec = job.spec
        rows = [
            ("test", f"{escape(spec.suite)}/{escape(spec.test)} ({escape(spec.scenario)})"),
            ("state", state(job.state.value) + (f" {escape(job.error)}" if job.error else "")),
            ("revision", escape(spec.build.revision or "-")),
            ("device", escape(job.device_id or "-")),
            ("submitter", escape(job.submitter or "-")),
            ("attempts", str(job.attempts)),
            ("submitted", when(job.submitted_at)),
            ("started", when(job.started_at)),
            ("finished", when(job.finished_at)),
        ]
        if spec.baseline:
            rows.append(("baseline", escape(spec.baseline)))
        if job.state is JobState.QUEUED:
            rows.append(("why it waits", escape(await self.api.jobs.why_waiting(job))))
        if not job.state.terminal:
            done = await self.api.store.count_iterations(job.id, job.attempts)
            rows.append(("progress", progress(done, spec.planned_iterations())))
        cells = "".join(f"<tr><th>{name}</th><td>{value}</td></tr>" for name, value in rows)
        facts = (
            f"<table class='facts' data-job='{escape(job.id)}' "
            f"data-state='{job.state.value}'>{cells}</table>"
        )
        caller = request[CALLER]
        if not job.state.terminal and caller.principal.may_cancel(job.submitter):
            facts += form(f"/console/jobs/{job.id}/cancel", "Cancel this job", request, "danger")
        if job.state is JobState.SUCCEEDED and not spec.ab:
            facts += (
                f"<p><a href='/console/compare?new={escape(job.id)}"
                f"&amp;base={escape(spec.baseline)}'>Compare with its baseline</a></p>"
                if spec.baseline
                else ""
            )
        return facts


def _already_ended(request: web.Request, job: Job) -> web.Response:
    """Cancelling a job that has ended: nothing is done, and the person is told so (409)."""
    body = (
        f"<p class='finding'>Job {escape(job.id)} had already ended ({state(job.state.value)}"
        f"{f': {escape(job.error)}' if job.error else ''}): nothing was cancelled.</p>"
        f"<p>{job_link(job.id)}</p>"
    )
    response = page(request, "Nothing to cancel", body, "jobs")
    response.set_status(409)
    return response


def _offset(asked: str | None, total: int) -> tuple[int, str]:
    """The first row of the values table that ?values=N asks for (N an iteration index, from 0
    as in the API and the CSV), on a page boundary; and what was wrong with N, if anything
    (the first page is shown then)."""
    if asked is None:
        return 0, ""
    allowed = f"an iteration of this job, 0 to {total - 1:,}" if total else "none yet"
    try:
        wanted = int(asked)
    except ValueError:
        return 0, f"?values={asked!r} is not a number: it takes {allowed}; the first page is shown."
    if not 0 <= wanted < max(total, 1):
        return 0, f"?values={wanted} is not {allowed}; the first page is shown."
    return wanted // ITERATIONS_SHOWN * ITERATIONS_SHOWN, ""


def _figures(job: Job, its: list[Iteration], offset: int = 0) -> str:
    """The summary (or an A/B job's comparison), each metric in iteration order (the first
    ITERATIONS_SHOWN iterations, said so when there are more) and the values of every
    iteration, ITERATIONS_SHOWN a page from `offset`."""
    units = units_of(
        {
            "job": {"spec": job.spec.model_dump(mode="json")},
            "iterations": [it.model_dump(mode="json") for it in its[:1]],
        }
    )
    out = ["<h2>Figures</h2>"]
    if job.spec.ab is not None:
        rows = by_severity(compare_variants(job, its))
        out.append(
            f"<table>{comparison_head()}{comparison_rows(rows, units)}</table>"
            if rows
            else "<p class='note'>No metric has values on both sides yet.</p>"
        )
    else:
        values = measured(its)
        out.append(
            summary_table(values, units)
            if values
            else "<p class='note'>No measured iteration with values yet.</p>"
        )
    names = sorted({name for it in its for name in it.values})
    measured_its = [it for it in its if not it.error]
    shown = measured_its[:ITERATIONS_SHOWN]
    aside = [n for n, it in enumerate(shown) if it.set_aside]
    warmup = sum(1 for it in shown if it.warmup)
    for name in names:
        plotted = [it for it in shown if name in it.values]
        out.append(
            series_plot(
                f"{name} in iteration order",
                [it.values[name] for it in plotted],
                units.get(name, ""),
                marked=aside,
                warmup=warmup,
                quantity=name,
                indexes=[it.index for it in plotted],
            )
        )
    if len(measured_its) > len(shown):
        out.append(
            f"<p class='note'>The charts draw the first {len(shown):,} of "
            f"{len(measured_its):,} iterations; <code>labd report {escape(job.id)}</code> draws "
            "every one.</p>"
        )
    rows_html = [
        f"<tr><td>{it.index}</td><td>{'warm-up' if it.warmup else escape(it.variant) or '-'}"
        f"</td><td>{escape(', '.join(f'{k}={v:.4g}' for k, v in sorted(it.values.items())))}"
        f"</td><td class='note'>{escape(it.error or '; '.join(it.flags))}</td></tr>"
        for it in its[offset : offset + ITERATIONS_SHOWN]
    ]
    out.append(
        f"<details id='values'{' open' if offset else ''}><summary>Every iteration's values"
        f"{f' ({len(its):,})' if len(its) > ITERATIONS_SHOWN else ''}</summary>"
        + _pages(job.id, offset, len(its))
        + table(["iteration", "kind", "values", "error or flags"], rows_html, "No iteration yet.")
        + "</details>"
    )
    return "".join(out)


def _kept_figures(job: Job, kept: dict[str, Any]) -> str:
    """The summary retention kept of a job whose raw iterations it removed."""
    removed = removal(kept)
    note = (
        f"<p class='note'>{removed['iterations']:,} raw iterations were removed on "
        f"{escape(removed['at'])} by the database's retention "
        "(<code>[store] raw_max_age_days</code>); the summary they gave is kept.</p>"
    )
    summary = kept["digest"].get("summary") or {}
    if job.spec.ab is not None:  # each metric's verdict, without the values behind it
        rows = [
            f"<tr><td>{escape(m)}</td><td>{escape(str(s.get('verdict', '-')))}</td></tr>"
            for m, s in summary.items()
        ]
        return "<h2>Figures</h2>" + note + table(["metric", "verdict"], rows, "No metric.")
    from labd.stats import Summary  # NumPy: imported where a page needs it

    units = units_of({"job": {"spec": job.spec.model_dump(mode="json")}, "iterations": []})
    units |= kept["digest"].get("units") or {}  # as the iterations recorded them
    summaries = {metric: Summary.from_dict(figures) for metric, figures in summary.items()}
    return "<h2>Figures</h2>" + note + summaries_table(summaries, units)


def _pages(job_id: str, offset: int, total: int) -> str:
    """Where the values table stands when it takes more than a page, and the way on."""
    if total <= ITERATIONS_SHOWN:
        return ""
    end = min(offset + ITERATIONS_SHOWN, total)  # rows offset..end-1, iterations by index
    links = [
        f"<a href='?values={at}#values'>{label}</a>"
        for at, label in (
            (offset - ITERATIONS_SHOWN, f"previous {ITERATIONS_SHOWN:,}"),
            (end, f"next {min(ITERATIONS_SHOWN, total - end):,}"),
        )
        if 0 <= at < total
    ]
    return (
        f"<p class='note'>Iterations {offset:,} to {end - 1:,} of {total:,} (numbered from 0, "
        "as in the API, the CSV and the artefact folders): "
        + " · ".join(links)
        + f". All at once: <code>labd jobs results {escape(job_id)} --format csv</code> or "
        f"<code>GET /api/v1/jobs/{escape(job_id)}/results</code>.</p>"
    )


def _set_aside(its: list[Iteration]) -> str:
    rows = [
        f"<tr><td>{it.index}</td><td>{escape(it.variant or '-')}</td>"
        f"<td>{escape('; '.join(it.flags) or '-')}</td></tr>"
        for it in its
        if it.set_aside
    ]
    if not rows:
        return ""
    return (
        "<h2>Set aside</h2><p class='note'>These iterations were measured but kept out of "
        "every figure, for the reasons given.</p>"
        + table(["iteration", "variant", "why"], rows, "")
    )


def _environment(its: list[Iteration]) -> str:
    first = next((it for it in its if not it.warmup and not it.error), None)
    if first is None:
        return ""
    return "<h2>Fingerprint</h2>" + environment(first.fingerprint)
