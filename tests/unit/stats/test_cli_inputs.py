"""The statistics commands on bad and odd input: a clear message or a defined verdict."""

from __future__ import annotations

import json
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
    flat = write(tmp_path / "f.csv", "series,build,value\n" + "x,1,5\n" * 30)
    assert labd("detect", flat).returncode == 0


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
        f"{wide}: not UTF-8 text (byte 0xff at offset 0); save it as UTF-8"
        ' (a spreadsheet\'s "CSV UTF-8")'
    )
    folder = labd("compare", good, str(tmp_path))
    assert (folder.returncode, folder.stderr.strip()) == (2, f"{tmp_path}: a directory, not a file")
