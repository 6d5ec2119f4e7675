"""Read a small text file (a manifest, the configuration) with a size limit.

A name given on the command line may be /dev/zero, a FIFO or a multi-gigabyte mistake; reading
it whole would take all the memory there is. At most `limit + 1` bytes are ever read.
"""

from __future__ import annotations

import io
from pathlib import Path

KiB = 1024
MiB = 1024 * KiB


class FileTooLarge(ValueError):
    """The file holds more than the limit; the message names the file and the limit."""


def size_text(size: int) -> str:
    """1048576 -> '1 MiB', 65536 -> '64 KiB', 1000 -> '1000 bytes'."""
    for unit, name in ((MiB, "MiB"), (KiB, "KiB")):
        if size >= unit and size % unit == 0:
            return f"{size // unit} {name}"
    return f"{size} bytes"


def read_limited(path: Path, limit: int, what: str) -> str:
    """The file as UTF-8 text (newlines as Path.read_text gives them); FileTooLarge when it
    holds more than `limit` bytes. OSError and UnicodeDecodeError pass through."""
    with path.open("rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise FileTooLarge(f"{path}: larger than {size_text(limit)}, the limit for {what}")
    # The same decoding and newline translation as Path.read_text.
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8").read()
