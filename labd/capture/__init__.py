"""Frame capture and what users see (Mozilla's Eideticker): green/red sync, visual metrics,
artifacts."""

from labd.capture.analyze import AnalysisOptions, Artifacts, Checkerboard, VisualMetrics, analyze
from labd.capture.errors import CaptureError, SyncError
from labd.capture.sources import FrameList, VideoFile

__all__ = [
    "AnalysisOptions",
    "Artifacts",
    "CaptureError",
    "Checkerboard",
    "FrameList",
    "SyncError",
    "VideoFile",
    "VisualMetrics",
    "analyze",
]
