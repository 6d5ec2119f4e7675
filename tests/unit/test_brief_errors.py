"""An error as a job keeps and publishes it (labd.visible.brief)."""

from __future__ import annotations

from labd.visible import MAX_ERROR, brief


def test_a_short_error_is_kept_with_its_unsafe_characters_escaped() -> None:
    assert brief("bad line\nsecond") == "bad line\nsecond"
    assert brief("a\0b\x1b[31m") == "a\\x00b\\x1b[31m"  # a NUL, an escape sequence


def test_a_long_error_keeps_its_start_and_its_end() -> None:
    error = "ValueError: " + "x" * 50_000 + " at http://127.0.0.1:8000/last"
    short = brief(error)
    assert len(short) == MAX_ERROR
    assert short.startswith("ValueError: xxx")
    assert short.endswith("xxx at http://127.0.0.1:8000/last")  # where it failed
    assert f" [... {len(error):,} characters, cut to 2,000 ...] " in short
    assert brief(short) == short  # the same error kept twice is the same text
