"""The job page's evidence: for one iteration, the video in a player, a filmstrip of the
frames where visual progress changed, the progress curve and the heat map; and every file the
job keeps, linked."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

from labd.artefacts import Artefact, ArtefactError, api_path
from labd.console.artefacts import ArtefactFiles, changes, evidence, still_url, url
from labd.console.layout import table
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
        asked = (query.get("variant", ""), query.get("iteration", ""))
        chosen = next((key for key in kept if (key[0], str(key[1])) == asked), list(kept)[-1])
        linked = list(kept)[:EVIDENCE_LINKS]
        if chosen not in linked:
            linked.append(chosen)
        links = " ".join(
            f"<a href='?iteration={n}&amp;variant={escape(v)}#evidence'"
            + (" class='here'" if (v, n) == chosen else "")
            + f">{escape(v + ' ' if v else '')}{n + 1}</a>"
            for v, n in linked
        )
        if len(kept) > len(linked):
            links += f" and {len(kept) - len(linked):,} more (?iteration=N&amp;variant=V)"
        variant, index = chosen
        out += [
            "<h2 id='evidence'>Evidence</h2>",
            f"<p class='note'>Iteration {escape(variant + ' ' if variant else '')}{index + 1} "
            f"(kept for: {links}).</p>",
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
                out.append(_filmstrip(job_id, video.name, frames))
            out.append(
                progress_curve(
                    "visual progress",
                    [float(f["t_ms"]) for f in frames],
                    [float(f["progress"]) for f in frames],
                )
            )
    if heatmap is not None:
        out.append(
            f"<figure><img src='{escape(url(job_id, heatmap.name))}' alt='heat map of changes' "
            "class='heatmap'><figcaption>Heat map: how often each pixel changed (blue never, "
            "red most).</figcaption></figure>"
        )
    return "".join(out)


def _filmstrip(job_id: str, video: str, frames: list[dict[str, Any]]) -> str:
    cells = "".join(
        f"<figure><img src='{escape(still_url(job_id, video, k))}' alt='frame at {t:.0f} ms' "
        f"loading='lazy'><figcaption>{t:.0f} ms · {100 * p:.0f}%</figcaption></figure>"
        for k, t, p in changes(frames)
    )
    return (
        "<h3>Filmstrip: the frames where visual progress changed</h3>"
        f"<div class='filmstrip'>{cells}</div>"
    )
