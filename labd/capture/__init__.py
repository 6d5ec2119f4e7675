"""Frame capture and what users see (Mozilla's Eideticker): live recording, green/red sync,
visual metrics, artifacts."""

from labd.capture.analyze import analyze
from labd.capture.colors import parse_color
from labd.capture.errors import CaptureError, SyncError
from labd.capture.findings import (
    AnalysisOptions,
    Artifacts,
    Checkerboard,
    VisualMetrics,
    untrustworthy,
)
from labd.capture.live import (
    H264Decoder,
    Recorder,
    SourceSpec,
    Spool,
    screenrecord_command,
    spool_summary,
)
from labd.capture.motion import Frame, gesture_metrics
from labd.capture.sources import FrameItem, FrameList, Recording, VideoFile, Wanted
from labd.capture.sync import fraction_matching
from labd.capture.syncpages import SyncPages

__all__ = [
    "AnalysisOptions",
    "Artifacts",
    "CaptureError",
    "Checkerboard",
    "Frame",
    "FrameItem",
    "FrameList",
    "H264Decoder",
    "Recorder",
    "Recording",
    "SourceSpec",
    "Spool",
    "SyncError",
    "SyncPages",
    "VideoFile",
    "VisualMetrics",
    "Wanted",
    "analyze",
    "fraction_matching",
    "gesture_metrics",
    "parse_color",
    "screenrecord_command",
    "spool_summary",
    "untrustworthy",
]
