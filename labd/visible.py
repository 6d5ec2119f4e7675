"""Text from outside (a job, a program's stderr, a file, the user) with the characters that
change what a reader sees written as visible escapes.

Printed raw in a terminal, an escape sequence recolours it, retitles its window or clears the
screen; in a terminal or a web page alike, a bidi override reorders what is read (a revision
`safe\\u202eexe.txt` reads as `safetxt.exe`). `shown` writes control characters, bidi
controls and lone surrogates as visible escapes (`\\x1b`, `\\u202e`). The CLI passes every
human-readable line through it (`labd.cli.text`), the console every page (`labd.console`).
`quoted` is how an error message quotes a value it refuses: never repeated whole; `brief` is an
error as a job keeps and publishes it.
"""

from __future__ import annotations

import math
import re

# C0 and C1 controls (ESC, BEL, CR, DEL, CSI ...), the bidi marks, embeddings, overrides and
# isolates, the line and paragraph separators, and lone surrogates (unprintable: stdout's
# encoder raises on them).
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(found: re.Match[str]) -> str:
    char = found.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def shown(text: object, *, lines: bool = False) -> str:
    """`text` (str() of anything else) with every unsafe character written as its escape;
    with `lines`, newlines are kept (a multi-line error), the rest still escaped."""
    value = text if isinstance(text, str) else str(text)
    if lines:
        return "\n".join(_UNSAFE.sub(_escaped, part) for part in value.split("\n"))
    return _UNSAFE.sub(_escaped, value)


MAX_ERROR = 2000  # characters of an error a job, an iteration or an event carries


def brief(error: str, limit: int = MAX_ERROR) -> str:
    """An error as a job keeps and publishes it: its unsafe characters escaped (`shown`; a NUL
    cannot even be stored in PostgreSQL's text), at most `limit` characters, the start
    and the end (where it failed) kept and the middle cut, counted. A library's message can
    quote a whole input: a times file read back with NUL bytes made one of 48 KB."""
    text = shown(error, lines=True)
    if len(text) <= limit:
        return text
    cut = f" [... {len(text):,} characters, cut to {limit:,} ...] "
    head = (limit - len(cut)) * 3 // 4
    tail = limit - len(cut) - head
    return text[:head] + cut + text[-tail:]


def quoted(value: object, limit: int = 40) -> str:
    """`value` as an error message quotes it (its repr), cut past `limit` characters with its
    length: one of 100,000 digits is not repeated whole, and an integer too long for Python
    to write (over 4,300 digits) is described instead."""
    if isinstance(value, int) and value.bit_length() > 13_000:
        return f"an integer of about {round(value.bit_length() * math.log10(2)):,} digits"
    text = value if isinstance(value, str) else repr(value)
    return repr(value) if len(text) <= limit else f"{text[:limit]!r}... ({len(text):,} characters)"
