"""Which `Range` a file answer honours, per RFC 9110 §14.

aiohttp's FileResponse gets three cases wrong, so its request is given the Range to act on:
- a Range in a unit other than bytes (`items=0-1`) must be ignored (a full 200), not a 416;
- an `If-Range` entity tag is not understood (only dates are): a mismatched one must give
  the full file, not the range (a resumed download would splice two versions);
- `bytes=-0` (the last zero bytes) is unsatisfiable (416), not the whole file as a 206.
"""

from __future__ import annotations

import re

from aiohttp.helpers import parse_http_date

_EMPTY_SUFFIX = re.compile(r"bytes=\s*-0+\s*", re.IGNORECASE)
# A range aiohttp refuses as malformed, so it answers 416 with `Content-Range: bytes */SIZE`.
UNSATISFIABLE = "bytes=-"


def range_to_honour(range_: str | None, if_range: str | None, etag: str) -> str | None:
    """The Range header FileResponse should see (None: none, send the whole file); `etag` is
    the file's current strong entity tag, without quotes."""
    if range_ is None:
        return None
    unit, equals, _ = range_.partition("=")
    if not equals or unit.strip().lower() != "bytes":
        return None
    if if_range is not None:
        validator = if_range.strip()
        if validator.startswith(('"', "W/")):
            if validator != f'"{etag}"':  # If-Range compares strongly: a weak tag never matches
                return None
        elif parse_http_date(validator) is None:
            return None  # neither a tag nor a date: no condition we can say holds
    if _EMPTY_SUFFIX.fullmatch(range_.strip()):
        return UNSATISFIABLE
    return range_
