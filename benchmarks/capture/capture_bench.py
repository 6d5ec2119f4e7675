"""Visual-metrics accuracy and speed at 1920x1080, next to browsertime's visualmetrics.

Videos are generated with exact ground truth (labd.capture.synthetic), encoded to H.264 by
ffmpeg (x264, crf 18), and analysed by `labd.capture.analyze` and by browsertime's
`visualmetrics-portable.py`, fetched with `npm pack browsertime` into a temporary directory
and run there from its own virtual environment (numpy, Pillow, OpenCV, pyssim: what its
dependency check asks for), never vendored.

Conventions made equal: both videos start with browsertime's orange lead-in (time zero is the
first frame after it); browsertime's copy has no red tail (it has no end marker and would count
the red screen as a visual change); `--full` keeps full-resolution frames; the page keeps clear
of the edge margins browsertime ignores.

Run: python benchmarks/capture/capture_bench.py [--no-reference]
Needs ffmpeg (and npm for the reference).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

from labd.capture import AnalysisOptions, Artifacts, FrameList, VideoFile, analyze
from labd.capture.colors import PRESETS
from labd.capture.synthetic import PageLoad

W, H = 1920, 1080


def encode(page: PageLoad, path: Path, tail: bool = True) -> Path:
    """Frames piped raw into x264."""
    command = ["ffmpeg", "-loglevel", "error", "-y", "-f", "rawvideo", "-pix_fmt", "bgr24"]
    command += ["-s", f"{page.width}x{page.height}", "-r", str(page.fps), "-i", "-"]
    command += [
        "-c:v",
        "libx264",
        "-preset",
        "veryfast",
        "-crf",
        "18",
        "-pix_fmt",
        "yuv420p",
        str(path),
    ]
    with subprocess.Popen(command, stdin=subprocess.PIPE) as ffmpeg:
        assert ffmpeg.stdin is not None
        frames = page.frames()
        total = page.lead + page.length
        for i, frame in enumerate(frames):
            if not tail and i >= total:
                break
            ffmpeg.stdin.write(frame.tobytes())
        ffmpeg.stdin.close()
    return path


def pages() -> dict[str, PageLoad]:
    orange = PRESETS["orange"]
    load = PageLoad.staircase(
        width=W,
        height=H,
        steps=5,
        spacing=18,
        chrome=0,
        lead=20,
        length=240,
        tail=10,
        start_color=orange,
    )
    busy = PageLoad.staircase(
        width=W,
        height=H,
        steps=5,
        spacing=18,
        chrome=0,
        lead=20,
        length=600,
        tail=10,
        start_color=orange,
        animate=True,
    )
    return {"page load (4 s, 6 distinct frames)": load, "busy (10 s, every frame new)": busy}


def timed(fn):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def reference(workdir: Path) -> Path | None:
    """browsertime's visualmetrics-portable.py in its own venv; None without npm."""
    npm = shutil.which("npm")
    if npm is None:
        return None
    subprocess.run(
        [npm, "pack", "browsertime", "--silent"], cwd=workdir, check=True, capture_output=True
    )
    tarball = next(workdir.glob("browsertime-*.tgz"))
    subprocess.run(["tar", "xzf", tarball.name], cwd=workdir, check=True)
    venv.create(workdir / "venv", with_pip=True)
    pip = workdir / "venv" / "bin" / "pip"
    subprocess.run(
        [str(pip), "install", "-q", "numpy", "pillow", "opencv-python-headless", "pyssim"],
        check=True,
    )
    return workdir / "package" / "visualmetrics" / "visualmetrics-portable.py"


def run_reference(script: Path, video: Path) -> tuple[dict[str, float], float]:
    python = script.parents[2] / "venv" / "bin" / "python"
    command = [str(python), str(script), "--video", str(video), "--orange", "--full", "--json"]
    command += ["--dir", str(video.with_suffix(".frames")), "--force"]
    out, seconds = timed(
        lambda: subprocess.run(
            command, check=True, capture_output=True, text=True, cwd=script.parent
        )
    )
    return json.loads(out.stdout), seconds


def peak_rss(video: Path) -> tuple[float, float, float]:
    """(peak RSS in MB, seconds, Speed Index) of an analysis in a process of its own."""
    code = (
        "import resource, sys, time\n"
        "from pathlib import Path\n"
        "from labd.capture import AnalysisOptions, VideoFile, analyze\n"
        "from labd.capture.colors import PRESETS\n"
        "t = time.perf_counter()\n"
        "options = AnalysisOptions(start_color=PRESETS['orange'])\n"
        "r = analyze(VideoFile(Path(sys.argv[1])), options)\n"
        "peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024\n"
        "print(peak, time.perf_counter() - t, r.speed_index)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(video)], check=True, capture_output=True, text=True
    )
    peak, seconds, speed_index = (float(x) for x in out.stdout.split())
    return peak, seconds, speed_index


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--no-reference", action="store_true", help="skip browsertime")
    parser.add_argument("--memory-only", action="store_true", help="only the memory figures")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="labd-capture-bench-"))
    if not args.memory_only:
        speed_table(workdir, None if args.no_reference else reference(workdir))
    memory_table(workdir)
    shutil.rmtree(workdir, ignore_errors=True)


def speed_table(workdir: Path, script: Path | None) -> None:
    options = AnalysisOptions(start_color=PRESETS["orange"])
    rows = []
    for name, page in pages().items():
        ours_video = encode(page, workdir / "labd.mp4")
        frames = page.lead + page.length + page.tail
        recording = VideoFile(ours_video)
        result, seconds = timed(lambda: analyze(recording, options))  # noqa: B023
        artifacts = Artifacts(video=workdir / "span.webm")
        _, seconds_art = timed(lambda: analyze(recording, options, artifacts))  # noqa: B023
        row = {
            "video": name,
            "truth SI": page.speed_index(),
            "labd SI": result.speed_index,
            "labd fps": frames / seconds,
            "labd fps +video": frames / seconds_art,
        }
        if script is not None:
            theirs_video = encode(page, workdir / "browsertime.mp4", tail=False)
            metrics, seconds_ref = run_reference(script, theirs_video)
            row["browsertime SI"] = float(metrics["SpeedIndex"])
            row["browsertime fps"] = (page.lead + page.length) / seconds_ref
        rows.append(row)
        del result
    # Frames already decoded: the analysis alone.
    page = PageLoad.staircase(
        width=W, height=H, spacing=18, chrome=0, lead=10, length=200, tail=5, animate=True
    )
    decoded = FrameList(page.timed_frames())
    _, seconds = timed(lambda: analyze(decoded, AnalysisOptions()))
    decoded_fps = len(decoded.items) / seconds

    print(f"\nVisual metrics at {W}x{H}, {os.cpu_count()} cores, one run\n")
    header = [
        "video",
        "truth SI",
        "labd SI",
        "browsertime SI",
        "labd fps",
        "labd fps +video",
        "browsertime fps",
    ]
    print(" | ".join(header))
    for row in rows:
        cells = [row["video"]] + [f"{row[k]:.1f}" if k in row else "-" for k in header[1:]]
        print(" | ".join(cells))
        if "browsertime SI" in row:
            err_truth = 100 * (row["labd SI"] / row["truth SI"] - 1)
            err_ref = 100 * (row["labd SI"] / row["browsertime SI"] - 1)
            ref_truth = 100 * (row["browsertime SI"] / row["truth SI"] - 1)
            ratio = row["labd fps"] / row["browsertime fps"]
            print(
                f"   labd vs truth {err_truth:+.2f}%, labd vs browsertime {err_ref:+.2f}%, "
                f"browsertime vs truth {ref_truth:+.2f}%, speed ratio {ratio:.1f}x"
            )
    print(f"\nalready-decoded frames (busy, every frame new): {decoded_fps:.0f} frames/s")


def memory_table(workdir: Path) -> None:
    # Memory: streamed, so peak RSS must not grow with the length of the recording. Each
    # analysis runs in a fresh process that reports its own peak.
    for minutes in (0.5, 5):
        length = int(minutes * 60 * 60)
        page = PageLoad.staircase(
            width=W, height=H, spacing=600, chrome=0, lead=30, length=length, tail=10,
            start_color=PRESETS["orange"], animate=True,
        )  # fmt: skip
        video = encode(page, workdir / "long.mp4")
        peak, seconds, speed_index = peak_rss(video)
        frames = page.lead + page.length + page.tail
        print(
            f"{minutes:g}-minute 1080p60 recording ({frames} frames): {seconds:.0f} s "
            f"({frames / seconds:.0f} frames/s), peak RSS {peak:.0f} MB; "
            f"SI {speed_index:.0f} vs truth {page.speed_index():.0f}"
        )


if __name__ == "__main__":
    sys.exit(main())
