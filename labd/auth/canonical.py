"""RFC 8785 (JSON Canonicalization Scheme) bytes of a message, fast.

The `rfc8785` package is the reference, but written in Python it costs about 28 us for a
typical submission, most of the 100 us budget of verifying one. JCS differs from the C
encoder's `json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False)` only in
numbers (ECMAScript's shortest form: 3600.0 is "3600"; 5e-05 is "0.00005") and in the order
of non-ASCII keys (by UTF-16 code units). So one walk normalises what the C encoder would
write differently, and anything it cannot normalise exactly (a float outside [1e-4, 1e16),
an integer beyond 2^53, NaN) goes to the reference implementation. A test checks the two
agree on generated JSON.
"""

from __future__ import annotations

import json
import math
from typing import Any

import rfc8785

SAFE_INT = 2**53
_encode = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, separators=(",", ":"), check_circular=False
).encode


class _Slow(Exception):
    """The value needs the reference implementation."""


def _normal(value: Any) -> Any:
    if isinstance(value, str) or value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        # I-JSON's integers are within +-(2^53 - 1), as the reference enforces; beyond, it
        # refuses (2^53 itself included: found by the property test).
        if -SAFE_INT < value < SAFE_INT:
            return value
        raise _Slow
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and abs(value) <= SAFE_INT:
            return int(value)  # ECMAScript writes 3600.0 as 3600 (and -0.0 as 0)
        if math.isfinite(value) and not value.is_integer() and 1e-4 <= abs(value) < 1e16:
            return value  # here Python's repr is ECMAScript's shortest form
        raise _Slow
    if isinstance(value, dict):
        keys = list(value)
        if not all(isinstance(k, str) for k in keys):
            raise _Slow
        if not all(k.isascii() for k in keys):
            keys.sort(key=lambda k: k.encode("utf-16-be"))
        else:
            keys.sort()
        return {k: _normal(value[k]) for k in keys}
    if isinstance(value, list | tuple):
        return [_normal(v) for v in value]
    raise _Slow


def canonical(value: Any) -> bytes:
    """The RFC 8785 form of a JSON value; rfc8785.CanonicalizationError (or TypeError) when
    it has none (NaN, a lone surrogate, an integer beyond 2^53, a non-JSON type)."""
    try:
        text = _encode(_normal(value))
    except _Slow:
        return rfc8785.dumps(value)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as e:  # a lone surrogate: no UTF-8, so no canonical form
        raise rfc8785.CanonicalizationError("input contains non-UTF-8 codepoints") from e
