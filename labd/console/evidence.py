"""The job page's evidence: for one iteration, the video in a player, a filmstrip of the
frames where visual progress changed, the progress curve and the heat map; and every file the
job keeps, linked."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from html import escape
from typing import Any

from labd.artefacts import Artefact, ArtefactError, api_path
from labd.console.artefacts import (
    ArtefactFiles,
    Filmstrip,
    changes,
    curve_points,
    evidence,
    still_url,
    url,
)
from labd.console.layout import table
from labd.console.stills import Stills
from labd.report import progress_curve

EVIDENCE_LINKS = 200  # iterations linked by the evidence's "kept for"; others by ?iteration=


async def evidence_section(files: ArtefactFiles, query: Mapping[str, str], job_id: str) -> str:
    """The evidence of the iteration `query` names (?iteration=N&variant=V), else of the last
    one that kept any; then the list of the job's files. Empty when the job kept none here
    (not even files it cannot serve)."""
    listing = await files.listing(job_id)
    if not listing.total and not listing.unservable:
        return ""
    kept = evidence(listing.of_kinds)
    out = []
    if kept:
        chosen, problem = _chosen(kept, query)
        linked = list(kept)[:EVIDENCE_LINKS]
        if chosen not in linked:
            linked.append(chosen)
        links = " ".join(
            f"<a href='?iteration={n}&amp;variant={escape(v)}#evidence'"
            + (" class='here'" if (v, n) == chosen else "")
            + f">{escape(v + ' ' if v else '')}{n}</a>"
            for v, n in linked
        )
        if len(kept) > len(linked):
            links += f" and {len(kept) - len(linked):,} more (?iteration=N&amp;variant=V)"
        variant, index = chosen
        out += [
            "<h2 id='evidence'>Evidence</h2>",
            f"<p class='finding'>{escape(problem)}</p>" if problem else "",
            f"<p class='note'>Iteration {escape(variant + ' ' if variant else '')}{index} "
            f"(folder {escape(_folder(variant, index))}; kept for: {links}).</p>",
            await _one(files, job_id, kept[chosen]),
        ]
    rows = [
        f"<tr><td><a href='{escape(url(job_id, a.name))}'>{escape(a.name)}</a></td>"
        f"<td>{escape(a.kind)}</td><td>{a.size:,} bytes</td></tr>"
        for a in listing.artefacts
    ]
    rest = ""
    if listing.left_out:
        api = escape(f"{api_path(job_id, '').removesuffix('/')}?offset={len(listing.artefacts)}")
        rest = (
            f"<p class='note'>The first {len(listing.artefacts):,} of {listing.total:,} files, in "
            f"name order; {listing.left_out:,} more are not listed here: "
            f"<code>labd artefacts list {escape(job_id)}</code> or "
            f"<code>GET {api}</code> lists them (a page at a time).</p>"
        )
    summary = (
        "Every file this job keeps on this host"
        if not listing.left_out
        else f"The files this job keeps on this host ({listing.total:,})"
    )
    if listing.unservable:
        rest += (
            f"<p class='note'>{listing.unservable:,} more files or folders are not listed: their"
            " names are hidden (a leading dot), too deep (over 8 folders) or hold characters an"
            " artefact's name may not (docs/artefacts.md); they stay on disk.</p>"
        )
    out.append(
        f"<details><summary>{summary}</summary>"
        + table(["file", "kind", "size"], rows, "")
        + rest
        + "</details>"
    )
    return "".join(out)


def _folder(variant: str, index: int) -> str:
    return f"{variant}/iteration-{index}" if variant else f"iteration-{index}"


def _chosen(
    kept: dict[tuple[str, int], dict[str, Artefact]], query: Mapping[str, str]
) -> tuple[tuple[str, int], str]:
    """The iteration whose evidence ?iteration=N&variant=V asks for, else the last that kept
    any; and what was wrong with the query, if anything."""
    last = list(kept)[-1]
    if "iteration" not in query:
        return last, ""
    asked, variant = query["iteration"], query.get("variant", "")
    instead = f"the evidence of iteration {_folder(*last)} is shown"
    try:
        index = int(asked)
    except ValueError:
        return (
            last,
            f"?iteration={asked!r} is not a number (an iteration index, from 0); {instead}.",
        )
    if (variant, index) not in kept:
        return (
            last,
            f"Iteration {_folder(variant, index)} kept no video, heat map or progress; {instead}.",
        )
    return (variant, index), ""


async def _one(files: ArtefactFiles, job_id: str, found: dict[str, Artefact]) -> str:
    out = []
    video, heatmap, progress = (found.get(k) for k in ("video", "heatmap", "progress"))
    if video is not None:
        out.append(
            f"<video controls preload='metadata' src='{escape(url(job_id, video.name))}' "
            "class='evidence'>The video is a WebM (VP8) file.</video>"
        )
    if progress is not None:
        try:
            frames = await files.progress(job_id, progress.name)
        except (ArtefactError, ValueError, KeyError) as e:
            out.append(f"<p class='finding'>The progress file cannot be read: {escape(str(e))}</p>")
        else:
            if video is not None and (why := files.refused(job_id, video.name)):
                out.append(f"<p class='finding'>No filmstrip: {escape(why)}.</p>")
            elif video is not None:
                kept = files.kept(job_id, video.name)
                out.append(await asyncio.to_thread(_filmstrip, job_id, video.name, frames, kept))
            # Off the event loop: a job's file may hold many frames, thinned to CURVE_MOST.
            out.append(await asyncio.to_thread(_curve, frames))
    if heatmap is not None:
        out.append(
            f"<figure><img src='{escape(url(job_id, heatmap.name))}' alt='heat map of changes' "
            "class='heatmap'><figcaption>Heat map: how often each pixel changed (blue never, "
            "red most).</figcaption></figure>"
        )
    return "".join(out)


def _curve(frames: list[dict[str, Any]]) -> str:
    points = curve_points(frames)
    return progress_curve("visual progress", [t for t, _ in points], [p for _, p in points])


def _filmstrip(
    job_id: str, video: str, frames: list[dict[str, Any]], kept: Filmstrip | None
) -> str:
    """The stills of the frames where progress changed; once the video is cut, a frame past
    its end is named in place of a broken image."""
    stills = kept if isinstance(kept, Stills) else Stills({})
    cells, past = [], 0
    for k, t, p in changes(frames):
        caption = f"<figcaption>{t:.0f} ms · {100 * p:.0f}%</figcaption>"
        if why := stills.past_end(k):
            past += 1
            cells.append(f"<figure><p class='note'>No still: {escape(why)}.</p>{caption}</figure>")
        else:
            src = escape(still_url(job_id, video, k))
            image = f"<img src='{src}' alt='frame at {t:.0f} ms' loading='lazy'>"
            cells.append(f"<figure>{image}{caption}</figure>")
    note = (
        f"<p class='finding'>{past} of these frames are past the end of the video "
        f"({stills.video_frames:,} frames; progress.json lists {len(frames):,}): the progress "
        "file does not match the video.</p>"
        if past
        else ""
    )
    return (
        "<h3>Filmstrip: the frames where visual progress changed</h3>"
        f"{note}<div class='filmstrip'>{''.join(cells)}</div>"
    )
