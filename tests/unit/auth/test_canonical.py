"""labd's fast RFC 8785 form is byte for byte the reference implementation's, on generated
JSON (the numbers, keys and strings where the two could differ included)."""

from __future__ import annotations

from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from labd.auth.canonical import canonical

numbers = (
    st.integers(-(2**60), 2**60)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([3600.0, -0.0, 5e-05, 1e16, 1e21, 0.1, 1e-7, 123456789.125, 2.0**53])
)
keys = st.text(max_size=6) | st.sampled_from(["a", "é", "\U0001f600", "\ufb01", "Z"])
values = st.recursive(
    st.none() | st.booleans() | numbers | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=15,
)


def reference(value: Any) -> bytes | type[Exception]:
    try:
        return rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, TypeError, ValueError) as e:
        return type(e)


@settings(max_examples=3000, deadline=None)
@given(values)
def test_the_same_bytes_as_the_reference(value: Any) -> None:
    expected = reference(value)
    if isinstance(expected, bytes):
        assert canonical(value) == expected
    else:
        with pytest.raises((rfc8785.CanonicalizationError, TypeError, ValueError)):
            canonical(value)


def test_numbers_are_written_as_ecmascript_does() -> None:
    assert canonical({"t": 3600.0, "z": -0.0, "s": 5e-05, "b": 1e21}) == (
        b'{"b":1e+21,"s":0.00005,"t":3600,"z":0}'
    )
