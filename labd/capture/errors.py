"""Why a recording cannot be analysed."""

from __future__ import annotations

from labd.errors import UsageError


class CaptureError(UsageError):
    """A recording or capture source is unusable: unreadable, corrupt, empty."""


class SyncError(CaptureError):
    """The green (start) or red (end) screen was not found where it must be."""
