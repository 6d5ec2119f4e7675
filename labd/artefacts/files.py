"""A job's artefacts on disk: the files under `<state_dir>/jobs/<job id>/` (videos, heat maps,
progress curves, the job's log), listed, measured and opened for reading.

Opening never follows a symbolic link and never leaves the job's folder: a job's program may
write into that folder (the host driver runs it there, possibly as another account), so a
link it leaves there must not make labd hand out a file the program could not read itself.
Each component is opened relative to its parent with O_NOFOLLOW, which also closes the gap
between checking a path and opening it. The last one is first opened only as a path (O_PATH)
and must be a regular file before it is opened for reading: opening a named pipe the program
left there would block the thread until a writer came (enough of them, every thread the daemon
has), and opening a device may do something; neither is an artefact.
"""

from __future__ import annotations

import mimetypes
import os
import re
import stat
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from labd.model import id_problem

JOBS_FOLDER = "jobs"
MAX_DEPTH = 8  # folders above a file
ARTEFACTS_PAGE = 1000  # files in a listing's page unless the caller asks for fewer
ARTEFACTS_PAGE_MAX = 5000  # the most one page holds
# A path segment: no leading dot (so neither `..` nor hidden files), no separators.
_SEGMENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@:+=-]{0,254}")
_ITERATION = re.compile(r"iteration-(\d+)")
# Types a browser may show inline; anything else is sent as an attachment (a page a job wrote
# must not run as the API's origin).
INLINE = frozenset(
    {"video/webm", "video/mp4", "image/png", "image/jpeg", "application/json", "text/plain"}
)
# The runner's and scenarios' own files, by name (as their iterations' fingerprints name them).
KINDS = {
    "heatmap.png": "heatmap",
    "progress.json": "progress",
    "input-latency.json": "input_latency",
    "job.log": "log",
}
_TYPES = {".webm": "video/webm", ".log": "text/plain", ".json": "application/json"}


class ArtefactError(Exception):
    """An artefact that cannot be served: `status` is the HTTP status that says why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Artefact:
    """One file of a job: `name` is its path under the job's folder, with `/`."""

    name: str
    kind: str  # video, heatmap, progress, log or file
    content_type: str
    size: int
    iteration: int | None
    variant: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def jobs_folder(state_dir: Path) -> Path:
    return state_dir / JOBS_FOLDER


def api_path(job_id: str, name: str) -> str:
    """Where the API serves one artefact."""
    return f"/api/v1/jobs/{quote(job_id, safe='')}/artefacts/{quote(name)}"


def content_type(name: str) -> str:
    suffix = Path(name).suffix.lower()
    return _TYPES.get(suffix) or mimetypes.guess_type(name)[0] or "application/octet-stream"


def kind_of(name: str) -> str:
    base = name.rsplit("/", 1)[-1]
    if base.endswith(".webm"):
        return "video"
    return KINDS.get(base, "file")


def path_problem(name: str) -> str | None:
    """Why `name` cannot name an artefact, or None when it can."""
    parts = name.split("/")
    if not name or len(parts) > MAX_DEPTH + 1:
        return f"artefact path {name[:80]!r} is empty or deeper than {MAX_DEPTH} folders"
    for part in parts:
        if not _SEGMENT.fullmatch(part):
            return (
                f"artefact path {name[:80]!r}: segment {part[:40]!r} is not allowed (letters, "
                "digits and _ . @ : + = - only, starting with a letter, a digit or _)"
            )
    return None


def encoded_separator(raw_path: str) -> str | None:
    """Why a URL's path, as sent, cannot name an artefact: a `/` sent as `%2F` is decoded to
    one before routing, where it would pass for a folder separator that a proxy or a log in
    front read as part of one name. None when there is none."""
    if "%2f" in raw_path.partition("?")[0].lower():
        return "artefact path: a '/' sent encoded (%2F) is not allowed; separate folders by '/'"
    return None


def list_artefacts(jobs_dir: Path, job_id: str) -> list[Artefact]:
    """Every regular file under the job's folder, in name order; links and hidden files are
    left out. An empty list when the folder does not exist (here). Unbounded: a job may
    write any number of files, so what answers a request takes `artefact_page` instead."""
    return [_artefact(name, size) for name, size in _walk(jobs_dir, job_id)]


@dataclass(frozen=True)
class ArtefactPage:
    """Part of a job's listing: `artefacts` from `offset` on, in name order, of `total`; and
    every file of `of_kinds` wherever it falls (the console's evidence)."""

    artefacts: list[Artefact]
    offset: int
    total: int
    of_kinds: list[Artefact] = field(default_factory=list)
    # Files and folders the job wrote under names no artefact may have (`path_problem`):
    # kept on disk, never served, so never listed; counted so a listing does not look whole.
    unservable: int = 0

    @property
    def next(self) -> int | None:
        """The offset of the next page; None on the last."""
        end = self.offset + len(self.artefacts)
        return end if end < self.total else None

    @property
    def left_out(self) -> int:
        """How many files are not in this page (before or after it)."""
        return self.total - len(self.artefacts)


def artefact_page(
    jobs_dir: Path,
    job_id: str,
    offset: int = 0,
    limit: int = ARTEFACTS_PAGE,
    of_kinds: frozenset[str] = frozenset(),
) -> ArtefactPage:
    """The job's files `offset` to `offset + limit` (limit capped at ARTEFACTS_PAGE_MAX) and
    how many there are. The folder is walked whole, so this blocks: run it in a thread. Only
    the page (and the files of `of_kinds`) become Artefacts."""
    limit = max(1, min(limit, ARTEFACTS_PAGE_MAX))
    offset = max(0, offset)
    unservable: list[str] = []
    found = _walk(jobs_dir, job_id, unservable)
    page = [_artefact(name, size) for name, size in found[offset : offset + limit]]
    kept = [_artefact(n, size) for n, size in found if of_kinds and kind_of(n) in of_kinds]
    return ArtefactPage(page, offset, len(found), kept, len(unservable))


def _walk(
    jobs_dir: Path, job_id: str, unservable: list[str] | None = None
) -> list[tuple[str, int]]:
    """(name, size) of every regular file under the job's folder, in name order; the names
    no artefact may have (hidden, too deep, not an artefact's) go to `unservable`, a folder's
    once."""
    found: list[tuple[str, int]] = []
    root = jobs_dir / job_id
    if id_problem(job_id) or not root.is_dir() or root.is_symlink():
        return found
    stack = [(root, "")]
    while stack:
        folder, prefix = stack.pop()
        try:
            entries = os.scandir(folder)
        except (FileNotFoundError, NotADirectoryError):
            continue  # removed meanwhile
        with entries:
            for entry in entries:
                name = f"{prefix}{entry.name}"
                if path_problem(name):
                    if unservable is not None:
                        unservable.append(name)
                    continue
                if entry.is_dir(follow_symlinks=False):
                    stack.append((Path(entry.path), f"{name}/"))
                elif entry.is_file(follow_symlinks=False):
                    try:
                        found.append((name, entry.stat(follow_symlinks=False).st_size))
                    except FileNotFoundError:
                        continue
    found.sort()
    return found


def _artefact(name: str, size: int) -> Artefact:
    parts = name.split("/")
    variant = parts[0] if len(parts) > 1 and parts[0] in ("base", "new") else ""
    iteration = next((int(m[1]) for p in parts if (m := _ITERATION.fullmatch(p))), None)
    return Artefact(name, kind_of(name), content_type(name), size, iteration, variant)


def open_artefact(jobs_dir: Path, job_id: str, name: str) -> tuple[int, os.stat_result]:
    """An open descriptor of the artefact (a regular file) and its status; the caller closes
    it. Raises ArtefactError: 400 for a malformed id or path, 403 for a link, 404 when it is
    not there or is not a regular file (a folder, a named pipe, a device)."""
    if problem := id_problem(job_id, "job id"):
        raise ArtefactError(400, problem)
    if problem := path_problem(name):
        raise ArtefactError(400, problem)
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(jobs_dir, flags | os.O_DIRECTORY)
    except OSError as e:
        raise ArtefactError(404, f"job {job_id!r} has no artefacts on this host") from e
    try:
        for depth, part in enumerate([job_id, *name.split("/")]):
            last = depth == name.count("/") + 1
            # The last one only as a path: a pipe or a device is not opened at all.
            mode = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC if last else flags | os.O_DIRECTORY
            try:
                child = os.open(part, mode, dir_fd=fd)
            except OSError as e:
                raise _refusal(fd, job_id, name, part, depth) from e
            os.close(fd)
            fd = child
        info = os.fstat(fd)
        if stat.S_ISLNK(info.st_mode):
            raise _link(job_id, name)
        if not stat.S_ISREG(info.st_mode):
            raise ArtefactError(404, f"{name!r} of job {job_id!r} is not a file")
        # Now opened for reading, through the descriptor: the very file just checked.
        readable = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    return readable, info


def _refusal(parent: int, job_id: str, name: str, part: str, depth: int) -> ArtefactError:
    try:
        link = stat.S_ISLNK(os.stat(part, dir_fd=parent, follow_symlinks=False).st_mode)
    except OSError:
        link = False
    if link:
        return _link(job_id, name)
    if depth == 0:
        return ArtefactError(404, f"job {job_id!r} has no artefacts on this host")
    return ArtefactError(404, f"job {job_id!r} has no artefact {name!r} ({part!r} not found)")


def _link(job_id: str, name: str) -> ArtefactError:
    return ArtefactError(
        403, f"{name!r} of job {job_id!r} is (or passes through) a symbolic link: refused"
    )


def disk_usage(folder: Path) -> int:
    """Bytes the folder's files take on disk (allocated blocks, as `du -B1` counts them), links
    not followed. Nothing is opened but folders (a named pipe or a device is only stat-ed)."""
    try:
        total = folder.lstat().st_blocks * 512
    except FileNotFoundError:
        return 0
    stack = [folder]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    info = entry.stat(follow_symlinks=False)
                    total += info.st_blocks * 512
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(Path(entry.path))
        except FileNotFoundError:
            continue  # removed meanwhile
    return total
