"""Query parameters of the HTTP API, checked: a bad one is a 400 that names it; and the job a
route's path names."""

from __future__ import annotations

import re

from aiohttp import web

from labd.model import Job, JobState, id_problem
from labd.store import Store

# ASCII digits only, with an optional '-': int() would also take full-width digits, spaces and
# underscores. (`[0-9]` is ASCII-only; `\d` is not.)
_INTEGER = re.compile(r"-?[0-9]+")


def int_query(
    request: web.Request, name: str, default: int, low: int, high: int, *, cap: bool = False
) -> int:
    """An integer query parameter in low..high; ValueError naming it otherwise.

    With `cap`, a value above `high` (however many digits it has) is taken as `high` instead.
    """
    raw = request.query.get(name)
    if raw is None:
        return default
    if not _INTEGER.fullmatch(raw):
        raise ValueError(f"{name}: not an integer: {raw[:40]!r}")
    digits = raw.removeprefix("-").lstrip("0")
    if len(digits) > len(str(max(abs(low), abs(high)))):
        # Too long to be in range, and perhaps too long for int() to convert.
        if cap and not raw.startswith("-"):
            return high
        raise ValueError(f"{name}: {raw[:40]} is outside {low}..{high}")
    value = int(raw)
    if cap and value > high:
        return high
    if not low <= value <= high:
        raise ValueError(f"{name}: {value} is outside {low}..{high}")
    return value


def states_query(request: web.Request) -> list[JobState]:
    """The job states `?state=` names (any number of them); ValueError naming a wrong one."""
    states = []
    for raw in request.query.getall("state", []):
        try:
            states.append(JobState(raw))
        except ValueError:
            known = ", ".join(s.value for s in JobState)
            raise ValueError(f"state: {raw[:40]!r} is not a job state ({known})") from None
    return states


async def job_named(store: Store, request: web.Request) -> Job | web.Response:
    """The job the path's `{id}` names, or the answer that says why there is none: 400 for an
    id no job may have, 404 for one no job has."""
    job_id = request.match_info["id"]
    if problem := id_problem(job_id, "job id"):
        return web.json_response({"errors": [problem]}, status=400)
    job = await store.get_job(job_id)
    if job is None:
        return web.json_response({"errors": [f"no job {job_id!r}"]}, status=404)
    return job
