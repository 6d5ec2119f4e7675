"""The test network: HAR archives replayed (or recorded) through one port, shaped like a
real link (round trip, bandwidth, loss), in a process of its own for a job's duration."""

from labd.replay.certs import CA_CERT, Authority, write_ca
from labd.replay.errors import ArchiveError
from labd.replay.har import Archive, load
from labd.replay.process import ReplayProcess
from labd.replay.recording import already_there, claim, not_a_file, release
from labd.replay.server import record, serve
from labd.replay.shaping import PROFILES, Profile, Shaper, profile, profile_for

__all__ = [
    "CA_CERT",
    "PROFILES",
    "Archive",
    "ArchiveError",
    "Authority",
    "Profile",
    "ReplayProcess",
    "Shaper",
    "already_there",
    "claim",
    "load",
    "not_a_file",
    "profile",
    "profile_for",
    "record",
    "release",
    "serve",
    "write_ca",
]
