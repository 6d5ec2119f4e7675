"""The statistics commands on bad and odd input: a clear message or a defined verdict."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np


def labd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "labd", *args], capture_output=True, text=True, timeout=60
    )


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def test_bad_sample_files_name_the_file_line_and_reason(tmp_path: Path) -> None:
    good = write(tmp_path / "good.csv", "\n".join(str(v) for v in range(1, 11)))
    cases = {
        "empty.csv": ("", "empty.csv: the file is empty"),
        "nan.csv": ("1\n2\nnan\n", "nan.csv: line 3: not a finite number: 'nan'"),
        "inf.csv": ("1\ninf\n", "inf.csv: line 2: not a finite number: 'inf'"),
        "text.csv": ("1\nabc\n", "text.csv: line 2: not a number: 'abc'"),
        "huge.csv": (
            "1\n1.2e300\n",
            "huge.csv: line 2: 1.2e+300 is out of range: magnitudes from 1e-100 to 1e+100"
            " (or 0); give the values in another unit",
        ),
        "tiny.csv": (
            "0\n-3e-302\n",
            "tiny.csv: line 2: -3e-302 is out of range: magnitudes"
            " from 1e-100 to 1e+100 (or 0); give the values in another unit",
        ),
        "neg.csv": (
            "metric,value\nload_ms,5\nload_ms,-3\n",
            "neg.csv: line 3: negative duration -3 for 'load_ms'",
        ),
        "results.csv": (  # `labd jobs results ID --format csv`: said so, not "9 columns"
            "job_id,attempt,iteration,warmup,metric,value,error,variant,set_aside\n"
            "j,1,0,False,load_ms,5,,,\n",
            "results.csv: labd's results CSV, which compare does not read: give the job id, "
            "or its results as JSON (labd jobs results ID --format json)",
        ),
    }
    for name, (content, message) in cases.items():
        result = labd("compare", good, write(tmp_path / name, content))
        assert (result.returncode, result.stderr.strip()) == (2, message), name
        assert "Traceback" not in result.stderr


def test_one_value_and_constant_samples_get_a_defined_verdict(tmp_path: Path) -> None:
    one = write(tmp_path / "one.csv", "5\n")
    many = write(tmp_path / "many.csv", "5\n6\n5\n")
    const = write(tmp_path / "const.csv", "7\n" * 10)
    result = labd("compare", one, many, "--json")
    assert result.returncode == 0
    (metric,) = json.loads(result.stdout)["metrics"]
    assert metric["verdict"] == "inconclusive" and "too few values" in metric["reason"]
    (metric,) = json.loads(labd("compare", const, const, "--json").stdout)["metrics"]
    assert metric["verdict"] == "no change" and "zero variance" in metric["reason"]


def test_a_regression_gates_ci_with_exit_code_1(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    base = write(
        tmp_path / "b.csv",
        "metric,value\n"
        + "".join(
            f"load_ms,{v}\nfps,{f}\n"
            for v, f in zip(rng.normal(100, 1, 30), rng.normal(60, 0.2, 30), strict=True)
        ),
    )
    new = write(
        tmp_path / "n.csv",
        "metric,value\n"
        + "".join(
            f"load_ms,{v}\nfps,{f}\n"
            for v, f in zip(rng.normal(105, 1, 30), rng.normal(60, 0.2, 30), strict=True)
        ),
    )
    result = labd("compare", base, new, "--json")
    assert result.returncode == 1
    verdicts = {m["metric"]: m["verdict"] for m in json.loads(result.stdout)["metrics"]}
    assert verdicts == {"load_ms": "regression", "fps": "no change"}
    keys = {
        "metric",
        "verdict",
        "method",
        "ci_low",
        "ci_high",
        "ratio_ci_low",
        "ratio_ci_high",
        "n_base",
        "n_new",
    }
    assert keys <= json.loads(result.stdout)["metrics"][0].keys()


def test_detect_reads_histories_and_refuses_unsorted_builds(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    values = 100 * (1 + rng.normal(0, 0.005, 80))
    values[50:] *= 1.06
    rows = "".join(f"load,{b},{v}\n" for b, v in enumerate(values))
    result = labd("detect", write(tmp_path / "h.csv", "series,build,value\n" + rows), "--json")
    assert result.returncode == 1
    alerts = json.loads(result.stdout)["alerts"]
    (alert,) = [a for a in alerts if abs(a["index"] - 50) <= 1]
    assert alert["series"] == "load" and alert["direction"] == "up"
    assert alert["build"] == str(alert["index"]) and alert["raised_at"] >= alert["index"]
    bad = write(tmp_path / "u.csv", "series,build,value\nx,2,1\nx,1,1\n")
    result = labd("detect", bad)
    assert (result.returncode, result.stderr.strip()) == (
        2,
        "u.csv: line 3: build 1 comes after 2: sort by build",
    )
    flat = write(
        tmp_path / "f.csv", "series,build,value\n" + "".join(f"x,{b},5\n" for b in range(30))
    )
    assert labd("detect", flat).returncode == 0
    # A build given twice shifted every index after it, silently; so did an empty name.
    again = write(tmp_path / "d.csv", "series,build,value\nx,r1,1\nx,r2,1\ny,r1,1\nx,r1,2\n")
    assert labd("detect", again).stderr.strip() == (
        "d.csv: line 5: build 'r1' of series 'x' again: one value per build (average the "
        "repeats, or name them apart)"
    )
    same = write(tmp_path / "s.csv", "series,build,value\nx,1,1\nx,1.0,2\n")
    assert "line 3: build '1.0' of series 'x' again" in labd("detect", same).stderr
    nameless = write(tmp_path / "n.csv", "series,build,value\nx,,1\n")
    assert labd("detect", nameless).stderr.strip() == "n.csv: line 2: the build is empty"


def test_names_that_look_like_markup_are_shown_as_they_are(tmp_path: Path) -> None:
    """The tables are drawn with rich, which reads [bold] and [/] in a string as markup: a
    series or metric named "[/]" crashed the command, "[bold]x[/bold]" showed as "x"."""
    folder = tmp_path / "a[/b]"
    folder.mkdir(parents=True)
    rows = "".join(
        f"[/],[/x]{b},{100 if b < 50 else 110}.{b % 3}\n[bold]x[/bold],{b},{b % 2}\n"
        for b in range(100)
    )
    history = write(folder / "h.csv", "series,build,value\n" + rows)
    result = labd("detect", history)
    assert result.returncode == 1, result.stderr
    assert "[/]" in result.stdout and "[/x]50" in result.stdout and "a[/b]" in result.stdout
    base = write(folder / "base.csv", "metric,value\n" + "[/]x,10\n[/]x,11\n" * 10)
    new = write(folder / "new.csv", "metric,value\n" + "[/]x,20\n[/]x,21\n" * 10)
    result = labd("compare", base, new)
    assert result.returncode == 1, result.stderr
    assert "[/]x" in result.stdout


def test_a_huge_cell_is_quoted_short_and_an_overflowing_numeral_is_out_of_range(
    tmp_path: Path,
) -> None:
    long = write(tmp_path / "long.csv", "series,build,value\na,0,1\na,1," + "1" * 100_000 + "\n")
    result = labd("detect", long)
    assert result.returncode == 2 and len(result.stderr) < 300
    assert "'1111" in result.stderr and "(100,000 characters) is out of range" in result.stderr
    over = write(tmp_path / "over.csv", "1\n1e400\n")
    result = labd("compare", over, over)
    assert (result.returncode, result.stderr.strip()) == (
        2,
        "over.csv: line 2: '1e400' is out of range: magnitudes from 1e-100 to 1e+100 (or 0);"
        " give the values in another unit",
    )
    grouped = write(tmp_path / "grouped.csv", "1\n1_100\n")
    result = labd("compare", grouped, grouped)
    assert result.stderr.strip() == "grouped.csv: line 2: not a number: '1_100'"


def test_calibrate_reports_iterations_per_component(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    pilot = write(
        tmp_path / "p.csv",
        "metric,value\n" + "".join(f"page_a,{v}\n" for v in rng.normal(100, 0.5, 60)),
    )
    result = labd("calibrate", pilot, "--json", "--draws", "100")
    assert result.returncode == 0, result.stderr
    (component,) = json.loads(result.stdout)["components"]
    assert component["component"] == "page_a" and component["class"] == "tight normal"
    assert 3 <= component["n"] <= 15


def test_calibrate_says_what_a_small_or_odd_pilot_allows(tmp_path: Path) -> None:
    """A pilot of 5 gave one number (15) where the noise it allows asks for 5 to 200; a
    constant pilot was "tight normal"; a pilot with its warm-up left in said nothing of it;
    and 99.9% detection was promised from 200 draws (a tester's finds)."""
    five = write(tmp_path / "five.csv", "metric,value\n" + "".join(
        f"a,{v}\n" for v in (99.1, 100.4, 101.2, 98.7, 100.9)))  # fmt: skip
    said = labd("calibrate", five, "--draws", "100")
    assert said.returncode == 0, said.stderr
    lines = said.stdout.splitlines()
    needed = int(lines[0].split(": ")[1].split()[0])
    ((low, beyond, high),) = re.findall(r"roughly: (\d+) to (more than )?(\d+)", lines[1])
    assert int(low) < needed  # 0.36 to 8.3 times: the chi-square interval of 4 df
    assert beyond or int(high) > 7 * needed
    constant = write(tmp_path / "constant.csv", "metric,value\n" + "b,100\n" * 20)
    said = labd("calibrate", constant).stdout
    assert "(constant: the pilot shows no noise," in said and "roughly" not in said
    rng = np.random.default_rng(4)
    warm = 100 + rng.normal(0, 0.5, 40)
    warm[:4] += [8, 6, 4, 2]  # the warm-up left in
    pilot = write(tmp_path / "warm.csv", "metric,value\n" + "".join(f"c,{v}\n" for v in warm))
    assert (
        "  pilot: the first 4 iterations look like warm-up: raise the manifest's warmup by 4"
        in (labd("calibrate", pilot, "--draws", "100").stdout)
    )
    refused = labd("calibrate", five, "--detection", "0.999")
    assert refused.returncode == 2
    assert "--detection 0.999 needs --draws of at least 5,000, not 200" in refused.stderr
    few = labd("calibrate", five, "--draws", "1", "--detection", "0.5")  # said -400.00%
    assert few.returncode == 2 and "--detection 0.5 needs --draws of at least 10, not 1" in (
        few.stderr
    )


def test_a_spreadsheets_csv_utf8_is_read_and_other_encodings_are_named(tmp_path: Path) -> None:
    """Excel's "CSV UTF-8" starts with a byte-order mark; UTF-16 is refused by name, and a
    directory is not "no such file"."""
    good = write(tmp_path / "good.csv", "\n".join(str(v) for v in range(1, 11)))
    marked = tmp_path / "excel.csv"
    marked.write_bytes(b"\xef\xbb\xbf" + "\n".join(str(v) for v in range(1, 11)).encode())
    same = labd("compare", good, str(marked), "--json")
    assert same.returncode == 0, same.stderr
    (row,) = json.loads(same.stdout)["metrics"]
    assert (row["n_new"], row["new"]["mean"], row["estimate"]) == (10, 5.5, 0.0)
    history = tmp_path / "history.csv"
    history.write_bytes(b"\xef\xbb\xbfseries,build,value\n" + b"s,1,5\ns,2,5\n")
    assert labd("detect", str(history)).returncode == 0
    wide = tmp_path / "utf16.csv"
    wide.write_text("1\n2\n3\n", encoding="utf-16")
    refused = labd("compare", good, str(wide))
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        f"{wide}: UTF-16 text (it starts with a UTF-16 byte-order mark); save it as UTF-8"
        ' (a spreadsheet\'s "CSV UTF-8")'
    )
    big_end = tmp_path / "u16be.csv"
    big_end.write_bytes("metric,value\nx,1\n".encode("utf-16-be"))
    for command in (("compare", str(big_end), good), ("detect", str(big_end))):
        result = labd(*command)
        assert result.returncode == 2, command
        assert result.stderr.startswith(f"{big_end}: holds NUL bytes (UTF-16 text?)"), command
    marked_be = tmp_path / "u16bom-be.csv"
    marked_be.write_bytes(b"\xfe\xff" + "metric,value\nx,1\n".encode("utf-16-be"))
    result = labd("compare", str(marked_be), good)
    assert result.returncode == 2
    assert result.stderr.startswith(f"{marked_be}: UTF-16 text (it starts with a UTF-16 byte"), (
        result.stderr
    )
    not_utf8 = tmp_path / "latin1.csv"
    not_utf8.write_bytes("1\n2\n\xe9\n".encode("latin-1"))
    result = labd("compare", good, str(not_utf8))
    assert "not UTF-8 text (byte 0xe9 at offset 4)" in result.stderr
    folder = labd("compare", good, str(tmp_path))
    assert (folder.returncode, folder.stderr.strip()) == (2, f"{tmp_path}: a directory, not a file")


def test_a_pilot_below_zero_needs_as_many_iterations_as_its_mirror(tmp_path: Path) -> None:
    """A signed metric around -10 with 1% noise is as easy to calibrate as one around +10:
    the fall of its values once went unseen (power 0 at every size)."""
    rng = np.random.default_rng(5)
    values = rng.normal(10, 0.1, 40)
    needed = []
    for sign, name in ((1, "pos.csv"), (-1, "neg.csv")):
        pilot = write(tmp_path / name, "".join(f"{sign * v}\n" for v in values))
        result = labd("calibrate", pilot, "--json", "--draws", "100")
        assert result.returncode == 0, result.stderr
        needed.append(json.loads(result.stdout)["components"][0]["n"])
    assert needed[0] is not None and needed[0] == needed[1]
    short = labd("calibrate", write(tmp_path / "four.csv", "1\n2\n3\n4\n"))
    assert (short.returncode, short.stderr.strip()) == (
        2,
        f"{tmp_path / 'four.csv'}: value: a pilot needs at least 5 values, got 4",
    )


def test_options_out_of_range_are_refused_by_name(tmp_path: Path) -> None:
    good = write(tmp_path / "good.csv", "\n".join(str(v) for v in range(1, 11)))
    for command in (
        ("compare", good, good, "--alpha", "nan"),
        ("compare", good, good, "--alpha", "1"),
        ("compare", good, good, "--effect", "0"),
        ("calibrate", good, "--draws", "0"),
        ("calibrate", good, "--detection", "2"),
    ):
        result = labd(*command)
        assert result.returncode == 2, command
        assert f"argument {command[-2]}: must be" in result.stderr, result.stderr


def test_pipes_long_lines_and_utf16_without_a_mark(tmp_path: Path) -> None:
    """compare reads a pipe as bash's <(...) gives it; a line past the csv module's limit and
    UTF-16 without its byte-order mark are named, not a traceback."""
    good = write(tmp_path / "good.csv", "\n".join(str(v) for v in range(1, 11)))
    piped = subprocess.run(
        ["bash", "-c", f'"$0" -m labd compare {good} <(cat {good}) --json', sys.executable],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert piped.returncode == 0, piped.stderr
    assert json.loads(piped.stdout)["metrics"][0]["n_new"] == 10
    long_line = write(tmp_path / "long.csv", "1" * 200_000 + "\n")
    result = labd("compare", good, long_line)
    assert (result.returncode, result.stderr.strip()) == (
        2,
        "long.csv: line 1: field larger than field limit (131072)",
    )
    wide = tmp_path / "u16.csv"
    wide.write_bytes("1\n2\n3\n".encode("utf-16-le"))
    for command in (("compare", good, str(wide)), ("detect", str(wide)), ("calibrate", str(wide))):
        result = labd(*command)
        assert (result.returncode, result.stderr.strip()) == (
            2,
            f"{wide}: holds NUL bytes (UTF-16 text?); save it as UTF-8"
            ' (a spreadsheet\'s "CSV UTF-8")',
        ), command


def test_a_result_json_of_the_wrong_shape_is_named(tmp_path: Path) -> None:
    """Each a one-line error with exit 2 (they were tracebacks with exit 3)."""
    good = write(tmp_path / "good.csv", "\n".join(str(v) for v in range(1, 11)))
    job = {"attempts": 1, "spec": {"metrics": [{"name": "m"}]}}
    record = {"attempt": 1, "index": 0, "warmup": False, "values": {"m": 1.0}}
    cases = {
        "[1, 2]": "not a labd result JSON (not an object)",
        '{"job": [], "iterations": []}': (
            "not a labd result JSON (job must be an object, is a list)"
        ),
        json.dumps({"job": job, "iterations": 5}): (
            "not a labd result JSON (iterations must be a list, is a whole number)"
        ),
        json.dumps({"job": job, "iterations": ["x"]}): (
            "iteration 0: not a labd result JSON (not an object)"
        ),
        json.dumps({"job": job, "iterations": [{**record, "values": [1]}]}): (
            "iteration 0: not a labd result JSON (values must be an object, is a list)"
        ),
        json.dumps({"job": job, "iterations": [{**record, "values": {"m": True}}]}): (
            "iteration 0: m: not a number: True"
        ),
        json.dumps({"job": job, "iterations": [{**record, "warmup": "no"}]}): (  # not warm-up
            "iteration 0: not a labd result JSON (warmup must be true or false, is a string)"
        ),
        json.dumps(
            {"job": {**job, "spec": {"metrics": [{"name": "m", "higher_is_better": "no"}]}}}
        ): "metric m: not a labd result JSON (higher_is_better must be true or false, is a string)",
        "[" * 100_000 + "]" * 100_000: "not a labd result JSON (nested too deeply)",
        # Readable values, but not whole records: what compare says beside the verdict
        # (conditions, iterations set aside) needs them.
        json.dumps({"job": job, "iterations": [record]}): (
            "iteration 0: job_id: Field required (expected the JSON of"
            " `labd jobs results ID --format json`)"
        ),
    }
    for text, message in cases.items():
        result = labd("compare", write(tmp_path / "r.json", text), good)
        assert (result.returncode, result.stderr.strip()) == (2, f"r.json: {message}"), text[:80]


def test_a_dash_reads_standard_input(tmp_path: Path) -> None:
    """`labd compare - new.csv` was taken for a job id ("cannot reach the daemon")."""
    new = write(tmp_path / "new.csv", "\n".join(str(v) for v in range(2, 32)))
    base = "\n".join(str(v) for v in range(1, 31))
    command = [sys.executable, "-m", "labd", "compare", "-", new, "--json"]
    result = subprocess.run(command, input=base, capture_output=True, text=True, timeout=60)
    assert result.returncode in (0, 1), result.stderr
    [metric] = json.loads(result.stdout)["metrics"]
    assert (metric["n_base"], metric["estimate"]) == (30, 1.0)
    history = "series,build,value\n" + "".join(f"s,{b},{100 + b % 2}\n" for b in range(40))
    command = [sys.executable, "-m", "labd", "detect", "-", "--json"]
    result = subprocess.run(command, input=history, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and json.loads(result.stdout)["series"][0]["builds"] == 40
