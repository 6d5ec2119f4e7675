"""Why an archive cannot be served or recorded."""

from __future__ import annotations

from labd.errors import UsageError


class ArchiveError(UsageError):
    """The HAR archive is unreadable, not a HAR, or too large."""
