"""Logcat's bytes become lines in linear time, and an endless line costs a bounded buffer."""

from __future__ import annotations

from labd_android.logcat import Lines


def test_lines_across_chunks_come_whole() -> None:
    lines = Lines(limit=10)
    got = [*lines.feed(b"ab\ncd"), *lines.feed(b"e\n\nf"), *lines.feed(b"g\n")]
    assert got == [b"ab", b"cde", b"", b"fg"] and lines.too_long == 0


def test_a_line_over_the_limit_is_dropped_once_and_never_held() -> None:
    lines = Lines(limit=10)
    got = list(lines.feed(b"ok\n" + b"x" * 8))
    for _ in range(1000):  # a flood with no newline
        got += lines.feed(b"x" * 7)
        assert len(lines.pending) <= 10
    got += lines.feed(b"xx\nnext\n" + b"y" * 11 + b"\n" + b"z" * 10 + b"\n")
    assert got == [b"ok", b"next", b"z" * 10]  # exactly the limit still fits
    assert lines.too_long == 2
