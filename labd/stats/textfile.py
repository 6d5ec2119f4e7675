"""An input file as UTF-8 text, read a block at a time: a bad first line is refused before the
rest is read (a 1 GiB file of garbage was once read whole, 6.3 GiB of memory and 30 s, before
its first line was checked), and a pipe such as <(cat a.csv), which reads only once, is read
once.

Errors name the file and the reason: missing, a directory, UTF-16 or UTF-32 (by byte-order
mark, or by the NUL bytes between the characters when it has none), bytes that are not UTF-8,
a line too long to be a row, a JSON file too large to read whole.
"""

from __future__ import annotations

import codecs
import io
import itertools
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from labd.errors import UsageError

UTF8_HINT = 'save it as UTF-8 (a spreadsheet\'s "CSV UTF-8")'
BLOCK = 1 << 16  # bytes read at a time
# A row holds at most three cells of at most the csv module's 128 KiB: a longer line is not a
# row (and is not gathered whole: a file without a newline would be).
LONGEST_LINE = 1 << 20
# A result JSON is parsed whole, about seven times its size in memory (55.6 MiB, 31,000
# iterations of 100 metrics: 373 MiB). `labd jobs results` of 10,000 iterations of 20 metrics
# prints about 8 MiB.
LARGEST_JSON = 64 << 20


class DataError(UsageError):
    """An input file cannot be used; the message names the file, line and reason."""


class TextFile:
    """A file's text in blocks, decoded and checked one block at a time, lines ending in
    "\\n" (universal newlines, as `Path.read_text` gives them). Open it with `with`;
    `bytes_read` counts the bytes taken from the file so far."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.bytes_read = 0
        self._file: BinaryIO | None = None

    def __enter__(self) -> TextFile:
        try:
            self._file = self.path.open("rb")
        except FileNotFoundError:
            raise DataError(f"{self.path}: no such file") from None
        except IsADirectoryError:
            raise DataError(f"{self.path}: a directory, not a file") from None
        except OSError as e:
            raise DataError(f"{self.path}: cannot read: {e.strerror or e}") from e
        return self

    def __exit__(self, *exc: object) -> None:
        if self._file is not None:
            self._file.close()

    def texts(self) -> Iterator[str]:
        """The text, a block at a time (no block empty)."""
        newlines = io.IncrementalNewlineDecoder(None, translate=True)
        pending = b""  # the start of a character cut by a block's end
        at = 0  # the file offset of pending's first byte
        first = True
        while block := self._block():
            if first:
                block, first = self._without_mark(block), False
                at = self.bytes_read - len(block)
            if b"\0" in block:  # UTF-16 without its byte-order mark decodes, NULs between
                raise DataError(f"{self.path}: holds NUL bytes (UTF-16 text?); " + UTF8_HINT)
            data = pending + block
            text, used = self._decode(data, at, final=False)
            pending, at = data[used:], at + used
            # A "\r" at a block's end is held back: it may begin a "\r\n".
            if text := newlines.decode(text):
                yield text
        if text := newlines.decode(self._decode(pending, at, final=True)[0], final=True):
            yield text

    def _block(self) -> bytes:
        assert self._file is not None, "a TextFile is read inside `with`"
        try:
            block = self._file.read(BLOCK)
        except IsADirectoryError:
            raise DataError(f"{self.path}: a directory, not a file") from None
        except OSError as e:
            raise DataError(f"{self.path}: cannot read: {e.strerror or e}") from e
        self.bytes_read += len(block)
        return block

    def _without_mark(self, block: bytes) -> bytes:
        """The first block without a UTF-8 byte-order mark (a spreadsheet's "CSV UTF-8");
        refused when it starts with a UTF-16 or UTF-32 one."""
        while len(block) < 4 and (more := self._block()):  # a pipe may give a byte at a time
            block += more
        if block.startswith((b"\xff\xfe", b"\xfe\xff")):
            kind = "UTF-32" if block.startswith(b"\xff\xfe\0\0") else "UTF-16"
            raise DataError(
                f"{self.path}: {kind} text (it starts with a {kind} byte-order mark); " + UTF8_HINT
            )
        return block.removeprefix(codecs.BOM_UTF8)

    def _decode(self, data: bytes, at: int, final: bool) -> tuple[str, int]:
        try:
            return codecs.utf_8_decode(data, "strict", final)
        except UnicodeDecodeError as e:
            raise DataError(
                f"{self.path}: not UTF-8 text (byte {data[e.start]:#04x} at offset "
                f"{at + e.start}); " + UTF8_HINT
            ) from None


def lines(texts: Iterable[str], name: str, longest: int = LONGEST_LINE) -> Iterator[str]:
    """The lines of the text, each with its "\\n" (the last may have none); a line longer
    than `longest` characters is refused by number."""
    parts: list[str] = []  # the line begun in earlier blocks
    size = number = 0
    for text in texts:
        pieces = text.split("\n")
        if len(pieces) > 1:
            number += len(pieces) - 1
            yield "".join(parts) + pieces[0] + "\n"
            yield from (piece + "\n" for piece in pieces[1:-1])
            parts, size = [], 0
        if pieces[-1]:
            parts.append(pieces[-1])
            size += len(pieces[-1])
        if size > longest:
            raise DataError(f"{name}: line {number + 1}: longer than {longest:,} characters")
    if parts:
        yield "".join(parts)


def whole(source: TextFile, texts: Iterable[str], name: str) -> str:
    """All the text, refused once more than LARGEST_JSON bytes have been read."""
    gathered = []
    for text in texts:
        if source.bytes_read > LARGEST_JSON:
            raise DataError(
                f"{name}: larger than {LARGEST_JSON / 2**20:g} MiB, too large a result JSON to"
                " read (give its values as a metric,value CSV, which is read a line at a time)"
            )
        gathered.append(text)
    return "".join(gathered)


def first_text(texts: Iterator[str]) -> tuple[Iterator[str], str]:
    """The texts again, and their first character that is not blank ("" when there is none).
    A blank start is given back as its newlines, one at a time (line numbers count them), and
    the blanks that begin the first line."""
    newlines, start = 0, ""
    for text in texts:
        if stripped := text.lstrip():
            again = itertools.chain(itertools.repeat("\n", newlines), [start + text], texts)
            return again, stripped[0]
        newlines += text.count("\n")
        _, newline, after = text.rpartition("\n")
        # More than a line's worth is still refused as too long a line.
        start = (after if newline else start + after)[: LONGEST_LINE + 1]
    return itertools.repeat("\n", newlines), ""
