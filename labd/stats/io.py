"""Reading samples and histories from files, with errors that name the file, line and reason.

Formats:
- a CSV with one number per line (one metric, called "value");
- a CSV with a header `metric,value` (several metrics);
- labd's result JSON (`labd jobs results ID --format json`): measured iterations of the last
  attempt, warm-up and failed iterations left out, directions from the job's metrics;
- for histories, a CSV with a header `series,build,value`.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labd.metric_specs import directions_of, metric_specs
from labd.stats.textfile import DataError, TextFile, first_text, lines, whole
from labd.visible import quoted

TIME_METRIC = re.compile(r"(_ms|_s|_us|_ns|_seconds|_time|time)$")
# Metrics of a sample file and series of a history file. Talos and Raptor results hold tens to
# a few hundred metrics; each takes `compare` about 0.05-0.1 s (Silverman's test of modes
# resamples each side), so 1,000 is a minute or two. The 200,000 of a generated file took
# 6 minutes and 2.9 GiB; a history's series cost `detect` about 1 ms each.
MOST_METRICS, MOST_SERIES = 1_000, 10_000


@dataclass
class Samples:
    """Measured values per metric, in iteration order, which direction is better, the unit
    where a result JSON declares one, and how messages name where they came from."""

    values: dict[str, list[float]] = field(default_factory=dict)
    higher_is_better: dict[str, bool] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)
    source: str = ""


# Magnitudes the statistics handle: their squares and sums stay finite and normal, so no
# variance overflows to inf (a step at 1e300 went unseen) and no noise scale underflows (at
# 1e-302 ordinary noise raised six false alerts).
LARGEST, SMALLEST = 1e100, 1e-100


def out_of_range(value: float) -> bool:
    """Whether the statistics cannot take `value`: not finite, or beyond LARGEST and SMALLEST."""
    return not math.isfinite(value) or abs(value) > LARGEST or 0 < abs(value) < SMALLEST


def _number(text: str, where: str, metric: str = "") -> float:
    try:
        value: float | None = float(text)
    except ValueError:
        value = None
    if value is None or "_" in text:  # float() reads "1_100" as 1100: no CSV cell means that
        raise DataError(f"{where}: not a number: {quoted(text)}")
    if text.strip().lower().lstrip("+-") in ("nan", "inf", "infinity"):
        raise DataError(f"{where}: not a finite number: {quoted(text)}")
    if out_of_range(value):
        # A numeral too large for a float (1e400) is out of range too, not "not finite".
        shown = f"{value:g}" if math.isfinite(value) else quoted(text)
        raise DataError(
            f"{where}: {shown} is out of range: magnitudes from {SMALLEST:g} to {LARGEST:g}"
            " (or 0); give the values in another unit"
        )
    if value < 0 and TIME_METRIC.search(metric):
        raise DataError(f"{where}: negative duration {value:g} for {quoted(metric)}")
    return value


def _csv_rows(texts: Iterable[str], name: str) -> Iterator[tuple[int, list[str]]]:
    """The non-blank rows of a CSV text, each with the number of its (last) line."""
    reader = csv.reader(lines(texts, name))
    try:
        for row in reader:
            if row and any(c.strip() for c in row):
                yield reader.line_num, row
    except csv.Error as e:  # a field over the csv module's limit (128 KiB), a stray quote
        raise DataError(f"{name}: line {reader.line_num}: {e}") from None


def read_samples(path: Path) -> Samples:
    """Values per metric from any of the sample formats."""
    return read_sample_file(path)[0]


def _file_name(path: Path) -> str:
    """How errors name a file: by its name, but a device or a pipe (/dev/null, bash's
    <(...) as /dev/fd/63) by its path as given: "null" or "63" alone says nothing."""
    return str(path) if path.absolute().parts[1:2] in (("dev",), ("proc",)) else path.name


def read_sample_file(path: Path) -> tuple[Samples, dict[str, Any] | None]:
    """Values per metric from any of the sample formats, and the labd result JSON itself
    when it is one."""
    name = _file_name(path)
    with TextFile(path) as file:
        texts, first = first_text(file.texts())
        if not first:
            raise DataError(f"{name}: the file is empty")
        if first in "{[":
            data = _json(whole(file, texts, name), name)
            return samples_from_results(data, name), data
        samples = _from_csv(_csv_rows(texts, name), name)
        samples.source = name
        return samples, None


def _from_csv(rows: Iterator[tuple[int, list[str]]], name: str) -> Samples:
    samples = Samples()
    first = next(rows, None)
    if first and [c.strip().lower() for c in first[1][:3]] == ["job_id", "attempt", "iteration"]:
        raise DataError(
            f"{name}: labd's results CSV, which compare does not read: give the job id, or "
            "its results as JSON (labd jobs results ID --format json)"
        )
    if first and [c.strip().lower() for c in first[1]] == ["metric", "value"]:
        for line, row in rows:
            where = f"{name}: line {line}"
            if len(row) != 2:
                raise DataError(f"{where}: expected 2 columns (metric,value), got {len(row)}")
            metric = row[0].strip()
            if not metric:
                raise DataError(f"{where}: no metric name before the value")
            if metric not in samples.values:
                _one_more(samples.values, "metrics", where, metric)
            samples.values.setdefault(metric, []).append(_number(row[1].strip(), where, metric))
    else:
        for line, row in itertools.chain([first] if first else [], rows):
            if len(row) != 1:
                raise DataError(
                    f"{name}: line {line}: {len(row)} columns; expected one number per line, "
                    "or the header metric,value and then one metric,value pair per line"
                )
            value = _number(row[0].strip(), f"{name}: line {line}")
            samples.values.setdefault("value", []).append(value)
    if not samples.values:
        raise DataError(f"{name}: no values")
    return samples


def _one_more(known: dict[str, Any], kind: str, where: str, name: str) -> None:
    """Refuses a new metric or series past MOST_METRICS or MOST_SERIES."""
    most = MOST_METRICS if kind == "metrics" else MOST_SERIES
    if len(known) >= most:
        raise DataError(
            f"{where}: more than {most:,} {kind} ({quoted(name)} is one more): at most"
            f" {most:,} are read at once"
        )


def _json(text: str, name: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except ValueError as e:
        raise DataError(f"{name}: not valid JSON: {e}") from None
    except RecursionError:
        raise DataError(f"{name}: not a labd result JSON (nested too deeply)") from None
    if not isinstance(data, dict):
        raise DataError(f"{name}: not a labd result JSON (not an object)")
    return data


def samples_from_results(data: Any, name: str) -> Samples:
    """Measured values of the last attempt from a labd result (a file's or the daemon's)."""
    job = _field(data, "job", dict, name)
    attempt = _field(job, "attempts", int, f"{name}: job")
    metrics = _field(_field(job, "spec", dict, f"{name}: job"), "metrics", list, name, [])
    samples = Samples(source=name)
    manifest = []
    for spec in metrics:
        metric = _field(spec, "name", str, f"{name}: a metric of the job")
        if spec.get("higher_is_better") is not None:  # null: the scenario's
            _field(spec, "higher_is_better", bool, f"{name}: metric {metric}")
        manifest.append(spec)
    iterations = _field(data, "iterations", list, name)
    _whole_answer(data, iterations, job, name)
    fingerprints = [it.get("fingerprint") for it in iterations if isinstance(it, dict)]
    declared = metric_specs(manifest, (f for f in fingerprints if isinstance(f, dict)))
    samples.higher_is_better.update(directions_of(declared))
    samples.units.update({m: spec["unit"] for m, spec in declared.items() if spec["unit"]})
    for number, it in enumerate(iterations):
        if not isinstance(it, dict):
            raise DataError(f"{name}: iteration {number}: not a labd result JSON (not an object)")
        where = f"{name}: iteration {it.get('index')}"
        for flag in ("warmup", "set_aside"):  # "no" would be taken for true
            if it.get(flag) is not None:
                _field(it, flag, bool, where)
        if it.get("attempt") != attempt or it.get("warmup") or it.get("error"):
            continue
        if it.get("set_aside") or it.get("variant"):  # flagged; or one side of an A/B job
            continue
        for metric, value in _field(it, "values", dict, where, {}).items():
            if not metric:
                raise DataError(f"{where}: a value without a metric name")
            # JSON has numbers: "12" is text (the daemon never writes one), true is not 1.
            if isinstance(value, bool) or not isinstance(value, int | float):
                kind = " (a string)" if isinstance(value, str) else ""
                raise DataError(f"{where}: {metric}: not a number: {quoted(value)}{kind}")
            if metric not in samples.values:
                _one_more(samples.values, "metrics", where, metric)
            samples.values.setdefault(metric, []).append(_number(str(value), where, metric))
    if not samples.values:
        # An A/B job's iterations are its variants' (JOB@new reads one variant as the job's).
        if any(isinstance(it, dict) and it.get("variant") for it in data["iterations"]):
            job_id = job["id"] if isinstance(job.get("id"), str) and job["id"] else "JOB"
            raise DataError(
                f"{name}: an A/B job: its iterations belong to its variants base and new, not "
                f"to the job; compare one variant, {job_id}@base or {job_id}@new (the job's "
                f"own verdict of new against base: labd jobs results {job_id})"
            )
        raise DataError(f"{name}: no measured iteration with values in the last attempt")
    return samples


def _whole_answer(
    data: dict[str, Any], iterations: list[Any], job: dict[str, Any], name: str
) -> None:
    """Refuses one page of the API's paged answer (GET /api/v1/jobs/J/results): read as the
    whole job, its first 1,000 iterations were once compared as all of them. The joined
    answer of `labd jobs results` has no next page and starts at offset 0."""
    offset, later, total = data.get("offset", 0), data.get("next"), data.get("total")
    for key, value in (("offset", offset), ("next", later), ("total", total)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            found = _JSON_KINDS.get(type(value), repr(value))
            raise DataError(
                f"{name}: not a labd result JSON ({key} must be a whole number, is {found})"
            )
    if offset is not None and offset < 0:
        raise DataError(f"{name}: not a labd result JSON (offset must be 0 or more, is {offset})")
    size = len(iterations)
    # A page whose `next` was dropped still says how many the job has.
    if later is None and not offset and (total is None or size >= total):
        return
    # Every page but the last holds `limit` iterations, so a full page knows its number.
    page = (
        f"page {offset // size + 1}"
        if later is not None and size and not offset % size
        else "a page"
    )
    held = f"iterations {offset} to {offset + size - 1}" if size else "no iteration"
    job_id = job["id"] if isinstance(job.get("id"), str) and job["id"] else "ID"
    raise DataError(
        f"{name}: {page} of a paged answer, not the whole job: {held}"
        + (f" of {total}" if total is not None else "")
        + (f", the next page from offset {later}" if later is not None else "")
        + f"; `labd jobs results {job_id} --format json` writes every page in one file"
    )


def _field(data: Any, key: str, kind: type, where: str, default: Any = None) -> Any:
    """data[key], which must be of `kind` (`default` when missing, if one is given)."""
    if not isinstance(data, dict):
        raise DataError(f"{where}: not a labd result JSON (expected an object)")
    if key not in data and default is not None:
        return default
    value = data.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        found = "missing" if key not in data else _JSON_KINDS.get(type(value), repr(value))
        raise DataError(
            f"{where}: not a labd result JSON ({key} must be {_JSON_KINDS[kind]}, is {found})"
        )
    return value


_JSON_KINDS = {
    dict: "an object",
    list: "a list",
    str: "a string",
    int: "a whole number",
    float: "a number",
    bool: "true or false",
    type(None): "null",
}


def read_history(path: Path) -> dict[str, tuple[list[str], list[float]]]:
    """Series of (builds, values) from a `series,build,value` CSV, in file order."""
    label = _file_name(path)
    with TextFile(path) as file:
        rows = _csv_rows(file.texts(), label)
        line, header = next(rows, (0, []))
        if not header:
            raise DataError(f"{label}: the file is empty")
        if [c.strip().lower() for c in header] != ["series", "build", "value"]:
            raise DataError(f"{label}: line {line}: expected the header series,build,value")
        series: dict[str, tuple[list[str], list[float]]] = {}
        seen: dict[str, set[str]] = {}  # each series' builds: one value per build
        for line, row in rows:
            where = f"{label}: line {line}"
            if len(row) != 3:
                raise DataError(f"{where}: expected 3 columns (series,build,value), got {len(row)}")
            name, build, value = (c.strip() for c in row)
            if not name or not build:
                raise DataError(f"{where}: the {'series' if not name else 'build'} is empty")
            if name not in series:
                _one_more(series, "series", where, name)
                series[name] = ([], [])
                seen[name] = set()
            builds, values = series[name]
            number = _numeric(build)
            if number and builds and _numeric(builds[-1]) and float(build) < float(builds[-1]):
                raise DataError(f"{where}: build {build} comes after {builds[-1]}: sort by build")
            key = str(float(build)) if number else build  # 1, 1.0 and 01 are one
            if key in seen[name]:
                # The detectors take one value per build in order: a repeat shifts every
                # index after it.
                raise DataError(
                    f"{where}: build {quoted(build)} of series {quoted(name)} again: one value "
                    "per build (average the repeats, or name them apart)"
                )
            seen[name].add(key)
            builds.append(build)
            values.append(_number(value, where, name))
    if not series:
        raise DataError(f"{label}: no values")
    return series


def _numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
