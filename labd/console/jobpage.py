"""One job as a person wants to see it: what it is and where it stands, its figures, values in
iteration order, what was set aside and why, the conditions it ran in, and the evidence (the
video, a filmstrip of the frames where the page changed, the heat map, the progress curve)."""

from __future__ import annotations

import asyncio
from html import escape

from aiohttp import web

from labd.console.artefacts import ArtefactFiles
from labd.console.evidence import evidence_section
from labd.console.lab import progress
from labd.console.layout import form, page, state, table, when
from labd.daemon.api import Api
from labd.daemon.guard import CALLER
from labd.daemon.heavy import Busy
from labd.model import Iteration, Job, JobState
from labd.report import (
    by_severity,
    comparison_head,
    comparison_rows,
    environment,
    series_plot,
    summary_table,
    units_of,
)
from labd.store import compare_variants, measured

ITERATIONS_SHOWN = 500


class JobPage:
    def __init__(self, api: Api, files: ArtefactFiles) -> None:
        self.api, self.files = api, files

    async def show(self, request: web.Request) -> web.Response:
        job_id = request.match_info["id"]
        job = await self.api.store.get_job(job_id)
        if job is None:
            raise web.HTTPNotFound(text=f"no job {job_id!r}\n")
        its: list[Iteration] = []
        try:
            # Reading and summarising every iteration is a heavy query like the API's results.
            async with self.api.heavy.turn():
                its = await self.api.store.iterations(job.id, attempt=job.attempts)
                figures = await asyncio.to_thread(_figures, job, its)
        except Busy:
            figures = "<p class='note'>The daemon is busy with other results; reload shortly.</p>"
        body = (
            await self._facts(request, job)
            + figures
            + _set_aside(its)
            + await evidence_section(self.files, request.query, job.id)
            + _environment(its)
        )
        title = f"Job {job.id}"
        return page(request, title, body, "jobs", live=not job.state.terminal)

    async def cancel(self, request: web.Request) -> web.StreamResponse:
        status, problem, _ = await self.api.cancel_as(request[CALLER], request.match_info["id"])
        if status != 200:
            return web.Response(status=status, text=problem + "\n")
        raise web.HTTPSeeOther(f"/console/jobs/{request.match_info['id']}")

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


def _figures(job: Job, its: list[Iteration]) -> str:
    """The summary (or an A/B job's comparison) and each metric in iteration order."""
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
    shown = [it for it in its if not it.error][:ITERATIONS_SHOWN]
    aside = [n for n, it in enumerate(shown) if it.set_aside]
    warmup = sum(1 for it in shown if it.warmup)
    for name in names:
        order = [it.values[name] for it in shown if name in it.values]
        out.append(
            series_plot(
                f"{name} in iteration order",
                order,
                units.get(name, ""),
                marked=aside,
                warmup=warmup,
                quantity=name,
            )
        )
    rows_html = [
        f"<tr><td>{it.index + 1}</td><td>{'warm-up' if it.warmup else escape(it.variant) or '-'}"
        f"</td><td>{escape(', '.join(f'{k}={v:.4g}' for k, v in sorted(it.values.items())))}"
        f"</td><td class='note'>{escape(it.error or '; '.join(it.flags))}</td></tr>"
        for it in its[:ITERATIONS_SHOWN]
    ]
    out.append(
        "<details><summary>Every iteration's values</summary>"
        + table(["#", "kind", "values", "error or flags"], rows_html, "No iteration yet.")
        + "</details>"
    )
    return "".join(out)


def _set_aside(its: list[Iteration]) -> str:
    rows = [
        f"<tr><td>{it.index + 1}</td><td>{escape(it.variant or '-')}</td>"
        f"<td>{escape('; '.join(it.flags) or '-')}</td></tr>"
        for it in its
        if it.set_aside
    ]
    if not rows:
        return ""
    return (
        "<h2>Set aside</h2><p class='note'>These iterations were measured but kept out of "
        "every figure, for the reasons given.</p>" + table(["#", "variant", "why"], rows, "")
    )


def _environment(its: list[Iteration]) -> str:
    first = next((it for it in its if not it.warmup and not it.error), None)
    if first is None:
        return ""
    return "<h2>Fingerprint</h2>" + environment(first.fingerprint)
