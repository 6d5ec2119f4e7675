"""Time and peak memory of `labd compare` and `labd detect` on a million rows, measured from
outside by /usr/bin/time (elapsed seconds, maximum resident set size of the whole process:
Python, imports, file reading and the statistics).

Limits: 1 GiB and 60 s for each case.

With --bounds, the inputs past the commands' bounds instead (docs/statistics.md, "Large inputs:
limits"): a 1 GiB file whose first line is garbage, 200,000 metrics, and the largest inputs
still taken: 1,000 metrics, 10,000 series, --draws 2000 on a pilot that reaches no size.

Run: python benchmarks/stats/scale_bench.py [--rows 1000000] [--bounds] [--keep DIR]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

LABD = Path(sys.executable).parent / "labd"
LIMIT_S, LIMIT_MIB = 60.0, 1024.0


def write_sample(path: Path, values: np.ndarray) -> None:
    np.savetxt(path, values, fmt="%.6f")


def write_history(path: Path, values: np.ndarray) -> None:
    with path.open("w") as out:
        out.write("series,build,value\n")
        out.writelines(f"m,{i},{v:.6f}\n" for i, v in enumerate(values))


def make_files(folder: Path, rows: int) -> dict[str, Path]:
    rng = np.random.default_rng(1)
    files = {
        "base": folder / "base.csv",
        "new": folder / "new.csv",
        "bimodal_base": folder / "bimodal_base.csv",
        "bimodal_new": folder / "bimodal_new.csv",
        "history": folder / "history.csv",
        "quiet_then_step": folder / "quiet_then_step.csv",
    }
    write_sample(files["base"], 100 * rng.lognormal(0, 0.02, rows))
    write_sample(files["new"], 101 * rng.lognormal(0, 0.02, rows))
    for name, level in (("bimodal_base", 100.0), ("bimodal_new", 100.5)):
        mode = rng.random(rows) < 0.3
        write_sample(files[name], level * (1 + rng.normal(0, 0.005, rows) + 0.02 * mode))
    history = 100 * (1 + rng.normal(0, 0.01, rows))
    for at in range(rows // 10, rows, rows // 10):  # a step every tenth of the history
        history[at:] *= 1.03 if (at // (rows // 10)) % 2 else 1 / 1.03
    write_history(files["history"], history)
    # One long segment: a stretch that only flickers, then a step at the very end. Dating that
    # step weighs a bend at every build of the segment.
    quiet = 100 + 0.01 * (-1.0) ** np.arange(rows)
    quiet[-20:] += 5
    write_history(files["quiet_then_step"], quiet)
    return files


def write_metrics(path: Path, metrics: int, per: int, rng: np.random.Generator) -> None:
    with path.open("w") as out:
        out.write("metric,value\n")
        for m in range(metrics):
            out.writelines(f"m{m},{v:.4f}\n" for v in rng.normal(100, 1, per))


def bound_cases(folder: Path) -> list[tuple[str, list[object]]]:
    """Files at and past the bounds, and the commands that read them."""
    rng = np.random.default_rng(2)
    garbage = folder / "garbage.csv"
    with garbage.open("wb") as out:
        out.write(b"not,a,number\n")
        line = b"x" * 1023 + b"\n"
        for _ in range(1 << 20):  # 1 GiB after the bad first line
            out.write(line)
    for name, metrics, per in (("many", 200_000, 2), ("most", 1_000, 25)):
        write_metrics(folder / f"{name}_base.csv", metrics, per, rng)
        write_metrics(folder / f"{name}_new.csv", metrics, per, rng)
    with (folder / "series.csv").open("w") as out:
        out.write("series,build,value\n")
        for s in range(10_000):
            out.writelines(f"s{s},{b},{v:.4f}\n" for b, v in enumerate(rng.normal(100, 1, 30)))
    # Two modes far apart: Hodges-Lehmann, and a 1% change found at no size up to 200.
    pilot = np.concatenate([rng.normal(100, 8, 40), rng.normal(130, 8, 20)])
    np.savetxt(folder / "pilot.csv", pilot, fmt="%.6f")
    return [
        ("compare, 1 GiB, line 1 garbage", ["compare", garbage, folder / "pilot.csv"]),
        ("detect, 1 GiB, line 1 garbage", ["detect", garbage]),
        (
            "compare, 200,000 metrics",
            ["compare", folder / "many_base.csv", folder / "many_new.csv"],
        ),
        (
            "compare, 1,000 metrics x 25",
            ["compare", folder / "most_base.csv", folder / "most_new.csv"],
        ),
        ("detect, 10,000 series x 30", ["detect", folder / "series.csv"]),
        ("calibrate --draws 2000, no size", ["calibrate", folder / "pilot.csv", "--draws=2000"]),
    ]


def measure(command: list[str]) -> tuple[float, float, int]:
    """Elapsed seconds, maximum RSS in MiB and exit code, as /usr/bin/time reports them."""
    done = subprocess.run(
        ["/usr/bin/time", "-f", "%e %M", *command], capture_output=True, text=True, check=False
    )
    last = done.stderr.strip().splitlines()[-1].split()
    return float(last[0]), int(last[1]) / 1024, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--bounds", action="store_true", help="the inputs past the bounds")
    parser.add_argument("--keep", type=Path, help="write the files here and keep them")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.keep or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        if args.bounds:
            cases = bound_cases(folder)
            print("inputs at and past the bounds (exit 2: refused)")
            print(f"{'case':<38} {'seconds':>8} {'max RSS MiB':>12} {'exit':>5}")
            for name, argv in cases:
                seconds, mib, code = measure([str(LABD), *map(str, argv), "--json"])
                print(f"{name:<38} {seconds:>8.2f} {mib:>12.0f} {code:>5}")
            return
        f = make_files(folder, args.rows)
        cases: list[tuple[str, list[object]]] = [
            ("compare, log-normal (Hodges-Lehmann)", ["compare", f["base"], f["new"]]),
            ("compare, two modes", ["compare", f["bimodal_base"], f["bimodal_new"]]),
            ("compare --method bootstrap", ["compare", f["base"], f["new"], "--method=bootstrap"]),
            ("compare --method welch", ["compare", f["base"], f["new"], "--method=welch"]),
            ("detect, ten steps", ["detect", f["history"]]),
            ("detect, one long quiet segment", ["detect", f["quiet_then_step"]]),
        ]
        print(f"{args.rows:,} rows per file; limits {LIMIT_S:g} s and {LIMIT_MIB:g} MiB each")
        print(f"{'case':<38} {'seconds':>8} {'max RSS MiB':>12} {'exit':>5} {'within':>7}")
        for name, argv in cases:
            seconds, mib, code = measure([str(LABD), *map(str, argv), "--json"])
            ok = seconds <= LIMIT_S and mib <= LIMIT_MIB and code in (0, 1)
            print(f"{name:<38} {seconds:>8.1f} {mib:>12.0f} {code:>5} {'yes' if ok else 'NO':>7}")


if __name__ == "__main__":
    main()
