"""Content codings: a HAR keeps bodies decoded (HAR 1.2) and the origin's Content-Encoding
among the headers; replay encodes the body again so the link carries about what the origin
sent (11,000 bytes of page went out for 70 bytes of gzip: 157 times the bandwidth).

gzip and deflate come from the standard library; br only when the `brotli` module is there.
A coding that cannot be produced is served as identity, without the header."""

from __future__ import annotations

import gzip
import importlib
import zlib
from collections.abc import Callable
from functools import lru_cache
from typing import Any

ALIASES = {"x-gzip": "gzip"}  # RFC 9110 section 8.4.1.3: x-gzip is gzip
ZLIB_LEVEL = 6  # zlib's default, and gzip's (the level an origin used is not recorded)
BROTLI_QUALITY = 5  # as servers compressing on the fly use; 11 takes seconds a megabyte


def coding_of(value: str) -> str:
    """The coding a Content-Encoding value names, in lower case; "" for none (identity). A
    list of several ("gzip, br") is kept whole: no encoder produces it."""
    coding = ",".join(part.strip() for part in value.lower().split(","))
    coding = ALIASES.get(coding, coding)
    return "" if coding in ("", "identity") else coding


def _brotli() -> Any | None:
    try:
        return importlib.import_module("brotli")
    except ImportError:
        return None


def _encoders() -> dict[str, Callable[[bytes], bytes]]:
    encoders: dict[str, Callable[[bytes], bytes]] = {
        # mtime 0: the same archive gives the same bytes on every run.
        "gzip": lambda body: gzip.compress(body, compresslevel=ZLIB_LEVEL, mtime=0),
        "deflate": lambda body: zlib.compress(body, ZLIB_LEVEL),  # HTTP's deflate is zlib's
    }
    if (brotli := _brotli()) is not None:
        encoders["br"] = lambda body: bytes(brotli.compress(body, quality=BROTLI_QUALITY))
    return encoders


ENCODERS = _encoders()


def encoded(body: bytes, coding: str) -> bytes | None:
    """`body` in `coding`, or None when this machine cannot produce that coding."""
    encoder = ENCODERS.get(coding)
    return encoder(body) if encoder is not None else None


@lru_cache(maxsize=256)  # a client sends the same value each time: parsed once
def accepted(accept_encoding: str) -> frozenset[str]:
    """The codings an Accept-Encoding value allows (q above 0), "*" standing for any not
    named; unparseable weights count as 1, as browsers never send them."""
    allowed: set[str] = set()
    refused: set[str] = set()
    for item in accept_encoding.lower().split(","):
        name, _, params = item.partition(";")
        name = ALIASES.get(name.strip(), name.strip())
        if not name:
            continue
        weight = params.strip().removeprefix("q=").strip() if params else "1"
        try:
            (allowed if float(weight) > 0 else refused).add(name)
        except ValueError:
            allowed.add(name)
    if "*" in allowed:  # any coding, not itself one
        allowed |= {coding for coding in ENCODERS if coding not in refused}
    return frozenset(allowed - {"*"})
