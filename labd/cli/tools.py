"""The parsers of labd's measuring tools, which work without a daemon: statistics, capture
and visual analysis, replay servers, performance marks."""

from __future__ import annotations

import argparse
from typing import Any

from labd.cli.handlers import fraction, lazy, name_arg

# Simulations per sample size in `labd calibrate`. At 2,000 a detection rate near 95% is known
# to +-0.5 points (one standard error), finer than its steps between the sizes tried; a pilot
# that reaches no size took 41 s at 2,000 (20 ms a draw); 1,000,000 would take 5 or 6 hours.
MOST_DRAWS = 2_000


def draws(value: str) -> int:
    """A number of simulations per size, from 1 to MOST_DRAWS."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {value!r}") from None
    if not 1 <= number <= MOST_DRAWS:
        raise argparse.ArgumentTypeError(f"must be from 1 to {MOST_DRAWS}, got {value}")
    return number


def _bounded(kind: type[int] | type[float], low: float, high: float) -> Any:
    """An argparse type: a finite number of `kind` from `low` to `high`, else a usage error
    that names the range."""

    def parse(value: str) -> int | float:
        try:
            number = kind(value)
        except ValueError:
            what = "a whole number" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"not {what}: {value!r}") from None
        if not low <= number <= high:  # also refuses nan
            raise argparse.ArgumentTypeError(f"must be from {low:g} to {high:g}, got {value}")
        return number

    return parse


def add_stats_commands(nouns: Any) -> None:
    compare = nouns.add_parser(
        "compare",
        help="A/B: does NEW differ from BASE? (exit 1 on a regression)",
        description="Compare two samples per metric: files (CSV, labd result JSON) or job ids.",
    )
    compare.add_argument(
        "base",
        help="baseline: a file (- reads standard input) or a job id (JOB@base, JOB@new: one "
        "side of an A/B job)",
    )
    compare.add_argument("new", help="candidate: a file or a job id (or JOB@base, JOB@new)")
    compare.add_argument(
        "--effect",
        type=fraction,
        default=0.01,
        help="smallest relative change that matters (default 0.01 = 1%%)",
    )
    compare.add_argument("--alpha", type=fraction, default=0.05, help="significance (default 0.05)")
    compare.add_argument(
        "--method", choices=["auto", "welch", "hodges-lehmann", "bootstrap"], default="auto"
    )
    compare.add_argument("--no-fdr", action="store_true", help="no multiple-comparison control")
    compare.add_argument(
        "--higher-is-better", action="store_true", help="for metrics without metadata"
    )
    compare.add_argument("--metric", action="append", help="only this metric (repeatable)")
    compare.add_argument("--json", action="store_true", help="print JSON")
    compare.set_defaults(handler=lazy("labd.cli.stats_cmd:compare"))

    detect = nouns.add_parser(
        "detect",
        help="find changes in histories (exit 1 when a regression is found)",
        description="Regression detection over histories: a CSV with series,build,value.",
    )
    detect.add_argument(
        "file",
        nargs="?",
        help="CSV with the header series,build,value, builds in order (- reads standard input)",
    )
    detect.add_argument("--suite", help="with --test: the history stored by the daemon")
    detect.add_argument("--test", help="with --suite: the history stored by the daemon")
    detect.add_argument(
        "--method",
        # labd.stats.METHODS, spelled out: importing scipy would slow every command
        choices=[
            "ets+rank+vote",
            "ets+rank",
            "ets+cusum",
            "ets+cusum+rank",
            "ets",
            "cusum",
            "rank",
            "talos",
        ],
        default="ets+rank+vote",
    )
    detect.add_argument(
        "--higher-is-better",
        action="store_true",
        help="higher values are better in every series (else lower, for a file; a stored"
        " series follows its metric's declaration)",
    )
    detect.add_argument("--json", action="store_true", help="print JSON")
    detect.set_defaults(handler=lazy("labd.cli.stats_cmd:detect"))

    report = nouns.add_parser(
        "report", help="an HTML report of a job, or of two compared, with its history"
    )
    report.add_argument("job", type=name_arg, help="the job (the baseline when a second is given)")
    report.add_argument("job2", nargs="?", type=name_arg, help="a job to compare with the first")
    report.add_argument(
        "-o", "--output", help="file to write (default report-JOB.html, or report-JOB-JOB2.html)"
    )
    report.add_argument("--force", action="store_true", help="replace an existing file")
    report.add_argument("--effect", type=fraction, default=0.01, help="effect of interest")
    report.set_defaults(handler=lazy("labd.cli.report_cmd:report"))

    calibrate = nouns.add_parser(
        "calibrate",
        help="iterations needed per component, by simulation from a pilot",
        description="Power by resampling a pilot: the smallest n that detects the effect.",
    )
    calibrate.add_argument("file", help="pilot samples: CSV (metric,value) or labd result JSON")
    calibrate.add_argument("--effect", type=fraction, default=0.01, help="default 0.01 (1%%)")
    calibrate.add_argument(
        "--detection", type=fraction, default=0.95, help="target detection rate (default 0.95)"
    )
    calibrate.add_argument(
        "--draws",
        type=draws,
        default=200,
        help=f"simulations per size, 1 to {MOST_DRAWS} (default 200)",
    )
    calibrate.add_argument("--json", action="store_true", help="print JSON")
    calibrate.set_defaults(handler=lazy("labd.cli.stats_cmd:calibrate"))


def add_capture_commands(nouns: Any) -> None:
    analyze = nouns.add_parser(
        "analyze",
        help="visual metrics of a recording between a green and a red screen",
        description="Speed Index, visual completeness, unique-frame rate and more, from pixels.",
    )
    analyze.add_argument("video", help="a recording: any video file OpenCV reads")
    analyze.add_argument("--json", action="store_true", help="print JSON")
    analyze.add_argument(
        "--start-color", default="green", help="name or #RRGGBB (orange: browsertime's)"
    )
    analyze.add_argument("--end-color", default="red", help="name or #RRGGBB")
    analyze.add_argument(
        "--tolerance",
        type=_bounded(int, 0, 765),
        default=100,
        help="sync colour tolerance, sum over RGB, 0 to 765 (default 100)",
    )
    analyze.add_argument("--progress", choices=["histogram", "pixel"], default="histogram")
    analyze.add_argument(
        "--blank-color",
        default="white",
        help="the page's blank colour, which progress is measured from (default white); "
        "'first': from the first frame after the start screen",
    )
    analyze.add_argument("--heatmap", metavar="OUT.png", help="write the heat map of changes")
    analyze.add_argument(
        "--video-out", metavar="OUT.webm", help="write the analysed span (VP8 WebM)"
    )
    analyze.add_argument("--progress-out", metavar="OUT.json", help="write the per-frame progress")
    analyze.add_argument(
        "--timestamps",
        metavar="FILE",
        help="per-frame times in ms, one per line (default: the .times file beside the video, "
        "as `labd capture` writes, when there is one)",
    )
    analyze.add_argument("--checkerboard", metavar="C1,C2,SIZE", help="measure checkerboarding")
    analyze.add_argument("--tearing-colors", metavar="C1,C2,...", help="detect tearing")
    analyze.add_argument(
        "--show-progress",
        choices=["auto", "always", "never"],
        default="auto",
        help="progress on stderr (auto: when stderr is a terminal)",
    )
    analyze.set_defaults(handler=lazy("labd.cli.capture_cmd:analyze"))

    capture = nouns.add_parser(
        "capture",
        help="record frames from a live source into a spool file",
        description="Record from an X11 display, a V4L2 device or an Android screen.",
    )
    source = capture.add_mutually_exclusive_group(required=True)
    source.add_argument("--x11", metavar="DISPLAY[+X,Y,WxH]", help="grab an X11 display or region")
    source.add_argument(
        "--v4l2", metavar="DEVICE", help="a capture card or camera, e.g. /dev/video0"
    )
    source.add_argument("--adb", metavar="SERIAL", help="an Android screen (screenrecord)")
    capture.add_argument("-o", "--output", required=True, help="spool video (.avi)")
    capture.add_argument(
        "--seconds",
        type=_bounded(float, 0.1, 86_400),
        default=10.0,
        help="how long, 0.1 to 86400 (default 10)",
    )
    capture.add_argument(
        "--fps",
        type=_bounded(float, 1, 240),
        default=60.0,
        help="frames per second asked for, 1 to 240 (default 60)",
    )
    capture.set_defaults(handler=lazy("labd.cli.capture_cmd:capture"))


def add_replay_commands(nouns: Any) -> None:
    replay = nouns.add_parser("replay", help="record and replay web pages, with network shaping")
    verbs = replay.add_subparsers(dest="verb", required=True, metavar="VERB")
    record = verbs.add_parser("record", help="a recording forward proxy that writes a HAR 1.2")
    record.add_argument("out", metavar="OUT.har")
    record.add_argument("--port", type=int, default=8080, help="0 picks a free port")
    record.add_argument("--host", default="127.0.0.1", help="address to listen on")
    record.add_argument("--ca", metavar="DIR", help="the replay CA (labd replay ca) for HTTPS")
    record.add_argument("--upstream-ca", metavar="PEM", help="trust this CA for origins too")
    record.add_argument(
        "--overwrite",
        action="store_true",
        help="replace OUT.har if it exists (refused otherwise); an empty recording never does",
    )
    record.add_argument(
        "--max-body-mb",
        type=float,
        default=64,
        help="refuse (502) and do not record a response whose body, decoded, is larger "
        "(default 64)",
    )
    record.set_defaults(handler=lazy("labd.cli.replay_cmd:record"))

    serve = verbs.add_parser("serve", help="serve an archive from memory, shaped")
    serve.add_argument("archive", help="a HAR file (recorded, or exported by a browser)")
    serve.add_argument("--port", type=int, default=8080, help="0 picks a free port")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on")
    serve.add_argument(
        "--profile", help="none, 2g, 3g-slow, 3g, 3g-fast, 4g, lte, dsl, cable, fios"
    )
    serve.add_argument("--latency-ms", type=float, help="round-trip time added")
    serve.add_argument("--down-kbps", type=float, help="downstream bandwidth")
    serve.add_argument("--up-kbps", type=float, help="upstream bandwidth")
    serve.add_argument("--jitter-ms", type=float, default=None, help="extra delay up to this")
    serve.add_argument(
        "--loss", type=float, default=None, help="share of exchanges with a lost packet"
    )
    serve.add_argument("--seed", type=int, default=0, help="for jitter and loss")
    serve.add_argument(
        "--ignore-param",
        action="append",
        metavar="NAME",
        help="query parameter not matched (repeatable)",
    )
    serve.add_argument("--ca", metavar="DIR", help="the replay CA (labd replay ca) for HTTPS")
    serve.add_argument(
        "--max-archive-mb", type=float, default=256, help="refuse larger archives (default 256)"
    )
    serve.set_defaults(handler=lazy("labd.cli.replay_cmd:serve"))

    ca = verbs.add_parser("ca", help="write a new CA certificate for HTTPS replay")
    ca.add_argument("out_dir", metavar="OUT_DIR")
    ca.set_defaults(handler=lazy("labd.cli.replay_cmd:ca"))


def add_marker_commands(nouns: Any) -> None:
    markers = nouns.add_parser(
        "markers",
        help="cold-launch iterations from logcat performance marks (Raptor's format)",
        description="Parse Raptor's PerformanceTiming lines and Android's launch lines.",
    )
    source = markers.add_mutually_exclusive_group(required=True)
    source.add_argument("--file", metavar="LOG", help="a saved logcat (brief or threadtime)")
    source.add_argument("--serial", metavar="S", help="tail this device's logcat")
    markers.add_argument("--app", help="only this app (origin or package)")
    markers.add_argument("--json", action="store_true", help="one JSON object per iteration")
    markers.set_defaults(handler=lazy("labd.cli.markers_cmd:markers"))
