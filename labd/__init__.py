"""labd: an event-driven lab orchestrator for performance testing on real devices."""

import os

__version__ = "0.1.0"
# The database schema this labd migrates to (labd.store.migrations; a test keeps them equal):
# what tells two builds of one version apart for an upgrade or a rollback.
SCHEMA = 8

# OpenCV's FFmpeg prints libav's own lines ("[ffv1 @ 0x...] slice CRC mismatch") on stderr
# beside labd's messages, which name the damage themselves; set before OpenCV is imported
# (its decoders read it once). An operator's own setting wins: 32 shows them again.
os.environ.setdefault("OPENCV_FFMPEG_LOGLEVEL", "-8")
