"""Frame capture and what users see (Mozilla's Eideticker): live recording, green/red sync,
visual metrics, artifacts."""

from labd.capture.analyze import analyze
from labd.capture.colors import parse_color
from labd.capture.errors import CaptureError, SyncError
from labd.capture.findings import AnalysisOptions, Artifacts, Checkerboard, VisualMetrics
from labd.capture.live import Recorder, SourceSpec, Spool, screenrecord_command, spool_summary
from labd.capture.sources import FrameList, Recording, VideoFile

__all__ = [
    "AnalysisOptions",
    "Artifacts",
    "CaptureError",
    "Checkerboard",
    "FrameList",
    "Recorder",
    "Recording",
    "SourceSpec",
    "Spool",
    "SyncError",
    "VideoFile",
    "VisualMetrics",
    "analyze",
    "parse_color",
    "screenrecord_command",
    "spool_summary",
]
