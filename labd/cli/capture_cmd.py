"""`labd analyze VIDEO` and `labd capture`: visual metrics from a recording, and recordings
from live sources."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from labd.errors import EXIT_RUNTIME, UsageError

if TYPE_CHECKING:
    from labd.capture import AnalysisOptions


def _colors(text: str, what: str) -> list[tuple[int, int, int]]:
    from labd.capture import parse_color

    colors = [parse_color(part) for part in text.split(",") if part.strip()]
    if not colors:
        raise UsageError(f"{what}: no colour given")
    return colors


def analyze(args: argparse.Namespace) -> int:
    from labd.capture import (
        Artifacts,
        Checkerboard,
        VideoFile,
        analyze,
        parse_color,
    )

    checkerboard = None
    if args.checkerboard:
        *colors, size = args.checkerboard.split(",")
        if len(colors) != 2 or not size.strip().isdigit():
            raise UsageError(f"--checkerboard {args.checkerboard!r}: expected C1,C2,SIZE")
        if not 2 <= int(size) <= 4096:
            raise UsageError(
                f"--checkerboard {args.checkerboard!r}: SIZE (a square's side in pixels) "
                f"must be from 2 to 4096, got {size.strip()}"
            )
        c1, c2 = _colors(",".join(colors), "--checkerboard")
        checkerboard = Checkerboard(colors=(c1, c2), square=int(size))
    blank = args.blank_color.strip().lower()
    options = _options(
        start_color=parse_color(args.start_color),
        end_color=parse_color(args.end_color),
        tolerance=args.tolerance,
        progress=args.progress,
        blank_color=None if blank == "first" else parse_color(blank),
        checkerboard=checkerboard,
        tearing_colors=_colors(args.tearing_colors, "--tearing-colors")
        if args.tearing_colors
        else [],
    )
    if args.video_out and not args.video_out.endswith(".webm"):
        raise UsageError(
            f"--video-out {args.video_out}: write a .webm (VP8); this OpenCV cannot encode H.264"
        )
    sidecar = Path(args.video).with_suffix(".times")  # where `labd capture` writes them
    if args.timestamps:
        timestamps = _timestamps(args.timestamps)
    elif sidecar.is_file() and sidecar != Path(args.video):
        timestamps = _timestamps(str(sidecar))  # a spool's container holds the nominal rate
    else:
        timestamps = None
    artifacts = Artifacts(
        video=Path(args.video_out) if args.video_out else None,
        heatmap=Path(args.heatmap) if args.heatmap else None,
        progress=Path(args.progress_out) if args.progress_out else None,
    )
    from labd.cli.progress import ReportingRecording, progress_line

    video = VideoFile(Path(args.video), timestamps)
    line = progress_line(args.show_progress)
    if line is None:
        result = analyze(video, options, artifacts)
    else:
        try:
            result = analyze(ReportingRecording(video, video.frame_count, line), options, artifacts)
        except BaseException:
            line.done(ok=False)
            raise
        line.done()
    if args.json:
        print(result.model_dump_json(indent=2))
        return 0
    rows = [
        ("frames", f"{result.start_frame} .. {result.end_frame} at {result.fps_capture:.1f} fps"),
        ("dropped frames", str(result.dropped_frames)),
        ("sync confidence", f"{result.sync_confidence:.3f}"),
        (
            "content area",
            f"{result.content_area.w}x{result.content_area.h}+{result.content_area.x}+{result.content_area.y}",
        ),
        ("unique frames", f"{result.unique_frames} ({result.unique_fps:.1f}/s)"),
        ("first visual change", _ms(result.first_visual_change_ms)),
        ("visually complete", _ms(result.visually_complete_ms)),
        ("last visual change", _ms(result.last_visual_change_ms)),
        ("speed index", f"{result.speed_index:.0f}"),
    ]
    if result.checkerboard_percent is not None:
        rows.append(("checkerboard", f"{result.checkerboard_percent:.2f}%"))
    if result.torn_frames is not None:
        rows.append(("torn frames", str(len(result.torn_frames))))
    rows += [(name, path) for name, path in result.artifacts.items()]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    return 0


def _options(**values: object) -> AnalysisOptions:
    """The options, or a usage error naming what cannot work together (e.g. sync colours a
    frame would match both of)."""
    from pydantic import ValidationError

    from labd.capture import AnalysisOptions

    try:
        return AnalysisOptions.model_validate(values)
    except ValidationError as e:
        raise UsageError(
            "\n".join(err["msg"].removeprefix("Value error, ") for err in e.errors())
        ) from None


MAX_TIME_MS = 1e12  # 31 years: any clock's milliseconds, and far from float's coarse steps


def _timestamps(name: str) -> list[float]:
    """Per-frame times in ms, one a line: each a finite number."""
    try:
        words = Path(name).read_text().split()
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"--timestamps {name}: {e}") from e
    times: list[float] = []
    for number, word in enumerate(words, 1):
        try:
            t = math.nan if "_" in word else float(word)  # Python reads 1_000; no log does
        except ValueError:
            t = math.nan
        if not math.isfinite(t) or abs(t) > MAX_TIME_MS:
            raise UsageError(
                f"--timestamps {name}: value {number} ({word[:40]!r}) is not a time in ms "
                f"(finite, within +-{MAX_TIME_MS:.0e})"
            )
        if times and t <= times[-1]:
            raise UsageError(
                f"--timestamps {name}: value {number} ({word}) is not after the one before it "
                f"({times[-1]:g}): frame times must increase"
            )
        times.append(t)
    if not times:
        raise UsageError(f"--timestamps {name}: no time in it (one per frame, in ms)")
    return times


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} ms"


def capture(args: argparse.Namespace) -> int:
    from labd.capture import Recorder, SourceSpec, spool_summary

    if args.x11:
        display, _, region = args.x11.partition("+")
        spec = SourceSpec("x11", display, _region(region) if region else None, fps=args.fps)
    elif args.v4l2:
        spec = SourceSpec("device", args.v4l2, fps=args.fps)
    else:
        import adbutils

        from labd.cli.adb import adb_device, adb_failure

        try:
            width, height = adb_device(args.adb).window_size()
        except (adbutils.AdbError, OSError) as e:
            raise adb_failure(args.adb, e) from e
        spec = SourceSpec("h264", args.adb, size=(width, height), fps=args.fps,
                          command=tuple(_adb_command(args.adb, (width, height))))  # fmt: skip
    recorder = Recorder(spec, Path(args.output), seconds=args.seconds)
    recorder.start()
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C ends the recording early
        recorder.process.join(args.seconds + 10)
    spool = recorder.stop()
    print(json.dumps(spool_summary(spool)))
    if spool.ended_early:  # a device unplugged, a stream cut: not the recording asked for
        print(f"labd: {args.output}: {spool.ended_early}", file=sys.stderr)
        return EXIT_RUNTIME
    return 0


def _adb_command(serial: str, size: tuple[int, int]) -> list[str]:
    import adbutils

    from labd.capture import screenrecord_command

    return screenrecord_command(serial, size, adbutils.adb_path())


def _region(text: str) -> tuple[int, int, int, int]:
    """X,Y,WxH"""
    try:
        x, y, size = text.split(",")
        w, h = size.lower().split("x")
        return int(x), int(y), int(w), int(h)
    except ValueError:
        raise UsageError(f"--x11 region {text!r}: expected X,Y,WxH") from None
