"""Content codings: a HAR keeps bodies decoded (HAR 1.2) and the origin's Content-Encoding
among the headers; replay encodes the body again so the link carries about what the origin
sent (11,000 bytes of page went out for 70 bytes of gzip: 157 times the bandwidth).

gzip and deflate come from the standard library; br only when the `brotli` module is there.
A coding that cannot be produced is served as identity, without the header. Codings applied
one over another ("gzip, gzip", in the order applied) are undone at record in reverse and
applied again at replay, layer by layer (aiohttp's client decodes a single coding only, and
refuses even a bodiless answer under one it lacks: the recorder decodes with these)."""

from __future__ import annotations

import gzip
import importlib
import zlib
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from labd.textfile import size_text

ALIASES = {"x-gzip": "gzip"}  # RFC 9110 section 8.4.1.3: x-gzip is gzip
ZLIB_LEVEL = 6  # zlib's default, and gzip's (the level an origin used is not recorded)
BROTLI_QUALITY = 5  # as servers compressing on the fly use; 11 takes seconds a megabyte


def coding_of(value: str) -> str:
    """The codings a Content-Encoding value names, in lower case and the order applied, joined
    by commas ("gzip,br"); "" for none (identity)."""
    parts = [ALIASES.get(p.strip(), p.strip()) for p in value.lower().split(",")]
    return ",".join(p for p in parts if p not in ("", "identity"))


def layers(coding: str) -> list[str]:
    """The codings of `coding_of`'s value, in the order applied."""
    return coding.split(",") if coding else []


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
DECODERS = frozenset(ENCODERS)  # `decoded` undoes what can be produced here, and no more


def producible(coding: str) -> bool:
    """Whether this machine can encode in every layer of `coding` ("" is identity: yes)."""
    return all(layer in ENCODERS for layer in layers(coding))


def encoded(body: bytes, coding: str) -> bytes | None:
    """`body` in `coding` (each layer in turn), or None when this machine cannot produce one."""
    if not producible(coding):
        return None
    for layer in layers(coding):
        body = ENCODERS[layer](body)
    return body


class Undecodable(Exception):
    """A recorded body this machine cannot decode (a coding it has no decoder for, or
    corrupt data); the message names which."""


def decoded(body: bytes, coding: str, limit: int) -> bytes:
    """`body` with every layer of `coding` undone, last applied first; Undecodable past
    `limit` bytes (a small body can inflate to gigabytes) or when a layer cannot be undone."""
    for layer in reversed(layers(coding)):
        if layer in ("gzip", "deflate"):
            body = _inflated(body, layer, limit)
        elif layer == "br" and (brotli := _brotli()) is not None:
            try:
                body = bytes(brotli.decompress(body))
            except brotli.error as e:
                raise Undecodable(f"br: {e}") from None
        else:
            raise Undecodable(f"no decoder here for the content coding {layer!r}")
        if len(body) > limit:
            raise Undecodable(f"decoded, the body is over the limit of {size_text(limit)}")
    return body


def _inflated(body: bytes, layer: str, limit: int) -> bytes:
    """gzip (every member, as gzip.decompress reads them) or HTTP's deflate (zlib's format,
    or raw deflate as some servers send), at most `limit` + 1 bytes out."""
    wbits = 31 if layer == "gzip" else (15 if body[:1] == b"\x78" else -15)
    out = bytearray()
    rest = body
    try:
        while rest and len(out) <= limit:
            inflater = zlib.decompressobj(wbits)
            out += inflater.decompress(rest, limit + 1 - len(out))
            if not inflater.eof:
                if inflater.unconsumed_tail:
                    break  # over the limit: the caller says so
                raise Undecodable(f"{layer}: the data ends early")
            rest = inflater.unused_data
            if layer != "gzip" or not rest.startswith(b"\x1f\x8b"):
                break  # the last member; what trails it (padding) is not the body
    except zlib.error as e:
        raise Undecodable(f"{layer}: {e}") from None
    return bytes(out)


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
