"""Time and peak memory of `labd compare` and `labd detect` on a million rows, measured from
outside by /usr/bin/time (elapsed seconds, maximum resident set size of the whole process:
Python, imports, file reading and the statistics).

Limits: 1 GiB and 60 s for each case.

Run: python benchmarks/stats/scale_bench.py [--rows 1000000] [--keep DIR]
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
    parser.add_argument("--keep", type=Path, help="write the files here and keep them")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.keep or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        f = make_files(folder, args.rows)
        cases = [
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
