"""The statistics commands' bounds: files read a block at a time (a bad start is refused before
the rest is read), at most so many metrics or series a file, a result JSON of at most so many
bytes, and --draws within its range."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from labd.stats import DataError, read_history, read_samples, textfile
from labd.stats import io as stats_io

MIB = 1 << 20


def labd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "labd", *args], capture_output=True, text=True, timeout=60
    )


class Feeder:
    """A FIFO fed `start` and then `endless` until `most` bytes are written or the reader
    closes its end; `written` counts what the reader took (at most a pipe's buffer more)."""

    def __init__(self, path: Path, start: bytes, endless: bytes, most: int) -> None:
        os.mkfifo(path)
        self.path, self.written = path, 0
        self._thread = threading.Thread(target=self._feed, args=(start, endless, most))
        self._thread.daemon = True  # a reader that never opens the FIFO must not hang the run
        self._thread.start()

    def _feed(self, start: bytes, endless: bytes, most: int) -> None:
        fd = os.open(self.path, os.O_WRONLY)
        try:
            self.written = os.write(fd, start)
            while self.written < most:
                self.written += os.write(fd, endless)
        except BrokenPipeError:  # the reader stopped reading: what it refused early
            pass
        finally:
            os.close(fd)

    def done(self) -> int:
        self._thread.join(timeout=30)
        return self.written


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Callable[[str, bytes, bytes], Feeder]]:
    feeders: list[Feeder] = []

    def make(name: str, start: bytes, endless: bytes) -> Feeder:
        feeders.append(Feeder(tmp_path / name, start, endless, most=200 * MIB))
        return feeders[-1]

    yield make
    for feeder in feeders:
        feeder.done()


@pytest.mark.parametrize(
    ("reader", "start", "message"),
    [
        (
            read_samples,
            b"not,a,number\n",
            "garbage.csv: line 1: 3 columns; expected one number per line, or the header "
            "metric,value and then one metric,value pair per line",
        ),
        (read_samples, b"1\n2\nabc\n", "garbage.csv: line 3: not a number: 'abc'"),
        (
            read_history,
            b"not,a,number\n",
            "garbage.csv: line 1: expected the header series,build,value",
        ),
    ],
)
def test_a_bad_start_is_refused_before_the_rest_is_read(
    fifo: Callable[[str, bytes, bytes], Feeder],
    reader: Callable[[Path], object],
    start: bytes,
    message: str,
) -> None:
    """200 MiB of garbage follow the bad line; the old reader read them all (a 1 GiB file took
    30 s and 6.3 GiB) before it looked at line 1."""
    feeder = fifo("garbage.csv", start, b"x" * 4095 + b"\n")
    with pytest.raises(DataError) as refused:
        reader(feeder.path)
    assert str(refused.value) == message
    assert feeder.done() < 2 * MIB


def test_a_line_without_end_is_refused_by_its_length(
    fifo: Callable[[str, bytes, bytes], Feeder],
) -> None:
    feeder = fifo("endless.csv", b"1\n2\n", b"1" * 4096)
    with pytest.raises(DataError) as refused:
        read_samples(feeder.path)
    assert str(refused.value) == "endless.csv: line 3: longer than 1,048,576 characters"
    assert feeder.done() < 3 * MIB


def test_a_result_json_past_its_cap_is_refused_by_size(
    fifo: Callable[[str, bytes, bytes], Feeder],
) -> None:
    feeder = fifo("r.json", b'{"job": "', b"x" * 4096)
    with pytest.raises(DataError) as refused:
        read_samples(feeder.path)
    assert str(refused.value).startswith("r.json: larger than 64 MiB, too large a result JSON")
    assert feeder.done() < textfile.LARGEST_JSON + 2 * MIB


def test_too_many_metrics_or_series_are_refused_with_the_file_line_and_limit(
    tmp_path: Path,
) -> None:
    """200,000 metrics took `labd compare` 6 minutes and 2.9 GiB; a file one past the limit is
    refused at the line of the one too many."""
    most = stats_io.MOST_METRICS
    samples = tmp_path / "many.csv"
    samples.write_text("metric,value\n" + "".join(f"m{i},1\n" for i in range(most + 1)))
    result = labd("compare", str(samples), str(samples))
    assert (result.returncode, result.stderr.strip()) == (
        2,
        f"many.csv: line {most + 2}: more than {most:,} metrics ('m{most}' is one more):"
        f" at most {most:,} are read at once",
    )
    most = stats_io.MOST_SERIES
    history = tmp_path / "wide.csv"
    history.write_text("series,build,value\n" + "".join(f"s{i},1,1\n" for i in range(most + 1)))
    result = labd("detect", str(history))
    assert (result.returncode, result.stderr.strip()) == (
        2,
        f"wide.csv: line {most + 2}: more than {most:,} series ('s{most}' is one more):"
        f" at most {most:,} are read at once",
    )


def test_draws_beyond_the_range_are_a_usage_error_naming_it(tmp_path: Path) -> None:
    """--draws 1000000 was taken, and would have run for hours."""
    pilot = tmp_path / "p.csv"
    pilot.write_text("".join(f"{100 + i % 7}\n" for i in range(30)))
    result = labd("calibrate", str(pilot), "--draws", "1000000")
    assert result.returncode == 2
    assert "argument --draws: must be from 1 to 2000, got 1000000" in result.stderr


def test_line_numbers_count_blank_lines(tmp_path: Path) -> None:
    """The old reader numbered the non-blank rows: this error was on "line 3"."""
    blank = tmp_path / "blank.csv"
    blank.write_text("1\n\n\n2\nabc\n")
    with pytest.raises(DataError, match=r"^blank\.csv: line 5: not a number: 'abc'$"):
        read_samples(blank)


@pytest.mark.parametrize("block", [1, 2, 3, 5, 7, 64])
def test_blocks_cut_anywhere_read_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    """Inside a character, inside a byte-order mark, between "\r" and "\n": the same values,
    lines and file offsets as one block."""
    monkeypatch.setattr(textfile, "BLOCK", block)
    path = tmp_path / "cut.csv"
    head = b"\xef\xbb\xbfmetric,value\r\n" + "é,1\r\nπ_ms,2\r\n".encode() * 5
    path.write_bytes(head)
    assert read_samples(path).values == {"é": [1.0] * 5, "π_ms": [2.0] * 5}
    path.write_bytes(head + "é,x\r\n".encode())
    with pytest.raises(DataError, match=r"^cut\.csv: line 12: not a number: 'x'$"):
        read_samples(path)
    path.write_bytes(head + b"x,\xe9\r\n")
    with pytest.raises(DataError) as refused:
        read_samples(path)
    assert str(refused.value).startswith(
        f"{path}: not UTF-8 text (byte 0xe9 at offset {len(head) + 2})"
    )
