"""A job's test network: a replay server in its own process for the job's duration, reachable
from the device, its profile written into every iteration's fingerprint."""

from __future__ import annotations

import asyncio
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import structlog

from labd.config import ReplaySettings
from labd.errors import CannotStart
from labd.model import Device, NetworkSpec
from labd.replay import Profile, ReplayProcess, profile_for
from labd.sdk import Driver, RunContext

log = structlog.get_logger("labd.runner")


ARCHIVES = "archives"  # replay.archive_dir's default, in the state directory


def with_archive_dir(settings: ReplaySettings, state_dir: Path) -> ReplaySettings:
    """`settings` with replay.archive_dir filled in: empty is `<state_dir>/archives`."""
    if settings.archive_dir:
        return settings
    return settings.model_copy(update={"archive_dir": str(state_dir / ARCHIVES)})


def archive_path(network: NetworkSpec, settings: ReplaySettings) -> tuple[Path, str]:
    """(the archive's path, a problem or ""): the name resolves in replay.archive_dir, and a
    name that leads out of it (absolute, through `..` or a symbolic link) is refused before
    anything is opened, in the same words whatever is there: a job learns nothing of the
    files outside. A refused path is replay.archive_dir itself."""
    if not settings.archive_dir:
        return Path(), "network.archive: replay.archive_dir is not set"
    root = Path(settings.archive_dir).expanduser().resolve()
    path = (root / network.archive).resolve()
    if not path.is_relative_to(root):
        return root, f"network.archive: {network.archive!r} is outside replay.archive_dir ({root})"
    if not root.is_dir():
        return root, (
            f"network.archive: replay.archive_dir {root} is not a directory (make it and put "
            "the archives jobs may name there)"
        )
    try:
        info = path.stat()
    except OSError:
        return path, f"network.archive: no such file {path}"
    if not stat.S_ISREG(info.st_mode):  # a directory was "no such file"
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else "a pipe, a device or a socket"
        return path, f"network.archive: {path} is not a regular file ({kind})"
    if info.st_size > settings.max_archive_mb * 2**20:
        return (
            path,
            f"network.archive: {path} is over replay.max_archive_mb ({settings.max_archive_mb:g})",
        )
    return path, ""


def network_fingerprint(network: NetworkSpec, profile: Profile | None = None) -> dict[str, object]:
    """What an iteration's fingerprint records of its test network: the profile's fields (its
    `name`, e.g. "3g", or "3g+custom" with the spec's overrides) and the archive. The
    Perfherder export reads the profile's name from here."""
    return {**(profile or profile_for(network)).fingerprint(), "archive": network.archive}


class MissWatch:
    """Which requests of an iteration the archive did not hold: a page that loaded with
    404s for its scripts or images is quick, and its numbers say nothing of the page. Only
    the recorded sites' requests count: a browser's own (update checks, /favicon.ico) are
    no part of the page."""

    def __init__(self, server: ReplayProcess) -> None:
        self.server = server
        self.missed = 0

    async def flags(self) -> list[str]:
        """A flag for the requests missed since the last call (none: []); asked after each
        iteration."""
        tally = await self.server.tally()
        missed = int(tally.get("page_missed", self.missed))
        new, self.missed = missed - self.missed, missed
        if new <= 0:
            return []
        return [
            f"requests the replay archive does not hold: {new} (the last: "
            f"{str(tally.get('last_page_miss', ''))[:MISS_SHOWN]})"
        ]


MISS_SHOWN = 200  # characters of a missed request in a flag


@asynccontextmanager
async def test_network(
    network: NetworkSpec, settings: ReplaySettings, driver: Driver, device: Device, ctx: RunContext
) -> AsyncIterator[MissWatch]:
    profile = profile_for(network)
    path, problem = await asyncio.to_thread(archive_path, network, settings)  # off the loop
    if problem:  # changed since it was submitted: the job's fault, not the device's
        raise CannotStart(problem)
    ca = Path(settings.ca_dir) if settings.ca_dir else None
    server = ReplayProcess(path, profile, settings.bind, 0, ca, tuple(network.ignore_params))
    await server.start()
    try:
        address = await driver.expose_port(device, settings.bind, server.port)
        ctx.network = {"proxy": f"http://{address}", "address": address, "profile": profile.name}
        ctx.fingerprint["network"] = network_fingerprint(network, profile)
        log.info(
            "replay server up",
            address=address,
            profile=profile.name,
            entries=server.ready["entries"],
            skipped=server.ready.get("skipped_count", 0),
        )
        yield MissWatch(server)
    finally:
        summary = await server.stop()
        if summary.get("missed"):
            log.warning("replay misses", missed=summary["missed"], urls=summary["misses"][:20])
        log.info(
            "replay server stopped", served=summary.get("served"), missed=summary.get("missed")
        )
