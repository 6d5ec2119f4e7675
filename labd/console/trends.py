"""Compare and history: many tests at once, base against new (in the spirit of Perfherder's
compare view), and one test over its builds with the prediction band and the changes found.
Both reuse `labd.stats` and the report's tables and charts."""

from __future__ import annotations

import asyncio
from html import escape
from typing import Any

from aiohttp import web

from labd.console.layout import job_link, page, table
from labd.daemon.api import Api
from labd.daemon.guard import CALLER
from labd.daemon.heavy import Busy
from labd.metric_specs import directions_of
from labd.model import Job, JobState
from labd.report import (
    SEVERITY,
    by_severity,
    comparison_head,
    comparison_rows,
    history_section,
    intervals,
    units_of,
)
from labd.stats import compare
from labd.store import RawValuesRemoved, history_view, measured_values

RECENT = 1000  # succeeded jobs searched for a revision's runs and for the list of tests
EFFECTS = ("0.005", "0.01", "0.02", "0.05")


class TrendPages:
    def __init__(self, api: Api) -> None:
        self.api = api

    async def compare(self, request: web.Request) -> web.Response:
        base = request.query.get("base", "").strip()
        new = request.query.get("new", "").strip()
        effect_text = request.query.get("effect", "0.01")
        effect = float(effect_text) if effect_text in EFFECTS else 0.01
        body = _compare_form(base, new, effect_text)
        if problem := _compare_query_problem(base, new, effect_text):
            body += f"<p class='finding'>{escape(problem)}</p>"
        elif base and new:
            pairs, problem = await self._pairs(base, new)
            if problem:
                body += f"<p class='finding'>{escape(problem)}</p>"
            else:
                try:
                    async with self.api.heavy.turn(request[CALLER].principal.name):
                        body += await self._comparison(pairs, effect)
                except Busy:
                    body += "<p class='note'>The daemon is busy; reload shortly.</p>"
                except RawValuesRemoved as e:
                    body += f"<p class='finding'>{escape(str(e))}</p>"
        return page(request, "Compare", body, "compare")

    async def _pairs(self, base: str, new: str) -> tuple[list[tuple[Job, Job]], str]:
        """The (base, new) jobs to compare: two job ids, or two revisions matched test by
        test (each side's newest succeeded run)."""
        store = self.api.store
        base_job, new_job = await store.get_job(base), await store.get_job(new)
        if base_job is not None and new_job is not None:
            return [(base_job, new_job)], ""
        recent = await store.list_jobs([JobState.SUCCEEDED], RECENT)
        newest: dict[tuple[str, str, str], Job] = {}
        for job in reversed(recent):  # oldest first: the newest run of each wins
            if job.spec.ab is None:
                newest[(job.spec.suite, job.spec.test, job.spec.build.revision)] = job
        tests = sorted({(s, t) for s, t, _ in newest})
        pairs = [
            (newest[(s, t, base)], newest[(s, t, new)])
            for s, t in tests
            if (s, t, base) in newest and (s, t, new) in newest
        ]
        if not pairs:
            return [], (
                f"No test has a succeeded run at both {base!r} and {new!r} (give two job ids, "
                "or two revisions; the newest run of each test at each is compared)."
            )
        return pairs, ""

    async def _comparison(self, pairs: list[tuple[Job, Job]], effect: float) -> str:
        rows: list[tuple[str, Job, Any]] = []
        units: dict[str, str] = {}
        pruned: list[str] = []  # tests one of whose runs retention took the raw values of
        compared: list[tuple[Job, Job]] = []
        for base, new in pairs:
            try:
                b, _ = await measured_values(self.api.store, base)
                n, specs = await measured_values(self.api.store, new)
            except RawValuesRemoved as e:
                if len(pairs) == 1:
                    raise
                pruned.append(f"{new.spec.suite}/{new.spec.test}: {e}")
                continue
            compared.append((base, new))
            directions = directions_of(specs)
            units |= {name: spec["unit"] for name, spec in specs.items() if spec["unit"]}
            shared = sorted(b.keys() & n.keys())
            samples = {m: (b[m], n[m], directions.get(m, False)) for m in shared}
            found = await asyncio.to_thread(compare, samples, effect=effect)
            rows += [(f"{new.spec.suite}/{new.spec.test}", new, r) for r in found]
        ordered = by_severity([r for _, _, r in rows])
        label_of = {id(r): label for label, _, r in rows}
        verdicts = [r.verdict for r in ordered]
        counts = ", ".join(f"{verdicts.count(v)} {v}" for v in SEVERITY if v in verdicts)
        html_rows = "".join(comparison_rows([r], units, label_of[id(r)]) for r in ordered)
        chart = intervals(
            "change of new against base, with 95% intervals",
            [
                (
                    f"{label_of[id(r)].split('/')[-1]} {r.metric}",
                    r.ratio_ci_low,
                    r.ratio,
                    r.ratio_ci_high,
                )
                for r in ordered[:30]
            ],
            effect,
        )
        jobs = "; ".join(f"{job_link(b.id)} → {job_link(n.id)}" for b, n in compared)
        left_out = "".join(f"<li>{escape(why)}</li>" for why in pruned)
        return (
            f"<p>{len(compared)} test(s), {len(ordered)} metric(s): {escape(counts)}. "
            f"Effect of interest ±{100 * effect:g}%. Jobs: {jobs}.</p>"
            + (f"<p class='finding'>Not compared:</p><ul>{left_out}</ul>" if pruned else "")
            + f"<table class='compare'>{comparison_head(with_test=True)}{html_rows}</table>{chart}"
        )

    async def history(self, request: web.Request) -> web.Response:
        suite = request.query.get("suite", "").strip()
        test = request.query.get("test", "").strip()
        if not suite or not test:
            return page(request, "History", await self._tests(), "history")
        try:
            async with self.api.heavy.turn(request[CALLER].principal.name):
                found = await history_view(self.api.store, suite, test)
                units = await self._units(suite, test)
                sections = await asyncio.to_thread(
                    lambda: [history_section(n, s, units) for n, s in found["series"].items()]
                )
        except Busy:
            sections = ["<p class='note'>The daemon is busy; reload shortly.</p>"]
        body = "".join(sections) or (
            "<p class='note'>No succeeded run of this test is stored yet.</p>"
        )
        return page(request, f"History of {suite}/{test}", body, "history")

    async def _units(self, suite: str, test: str) -> dict[str, str]:
        runs = await self.api.store.finished_jobs(suite, test, limit=1)
        return await self._units_of(runs[-1]) if runs else {}

    async def _units_of(self, job: Job) -> dict[str, str]:
        """Each metric's unit: the spec's, else what the scenario declared (in the first
        iteration's fingerprint)."""
        first, _ = await self.api.store.iteration_records(job.id, 0, 1)
        return units_of({"job": {"spec": job.spec.model_dump(mode="json")}, "iterations": first})

    async def _tests(self) -> str:
        recent = await self.api.store.list_jobs([JobState.SUCCEEDED], RECENT)
        tests = sorted({(j.spec.suite, j.spec.test) for j in recent})
        rows = [
            f"<tr><td><a href='/console/history?suite={escape(s)}&amp;test={escape(t)}'>"
            f"{escape(s)}/{escape(t)}</a></td></tr>"
            for s, t in tests
        ]
        return table(["test"], rows, "No test has a succeeded run yet.")


def _compare_query_problem(base: str, new: str, effect: str) -> str:
    """What is wrong with the compare query, or '' (an empty query is the blank form)."""
    if effect not in EFFECTS:
        return (
            f"?effect={effect!r} is not an effect of interest the comparison offers "
            f"({', '.join(EFFECTS)})."
        )
    if bool(base) != bool(new):
        given, missing = ("base", "new") if base else ("new", "base")
        return (
            f"?{given}= is given but ?{missing}= is missing: compare needs both (two job ids, "
            "or two revisions)."
        )
    return ""


def _compare_form(base: str, new: str, effect: str) -> str:
    options = "".join(
        f"<option value='{e}'{' selected' if e == effect else ''}>±{float(e) * 100:g}%</option>"
        for e in EFFECTS
    )
    return (
        "<form method='get' class='compare-form'>"
        f"<label>base <input name='base' value='{escape(base)}' placeholder='job or revision'>"
        f"</label> <label>new <input name='new' value='{escape(new)}' "
        "placeholder='job or revision'></label> "
        f"<label>effect <select name='effect'>{options}</select></label> "
        "<button type='submit'>Compare</button></form>"
    )
