"""How a device's screen becomes frames: the interfaces a driver implements to offer capture.

A `CaptureSource` describes what to open in a form a capture process can receive (a frozen
dataclass of plain values: it is pickled into that process); its `open` runs there and gives
a `FrameSource`, read as fast as the source allows on that process's own thread. labd's
recorder (`labd.capture.Recorder`) spools the frames; built-in sources are
`labd.capture.SourceSpec` (X11 or the local screen through mss, V4L2 capture cards, an H.264
stream such as Android's screenrecord).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

Image = NDArray[np.uint8]  # height x width x 3, BGR (OpenCV's order)


class FrameSource(ABC):
    """An open live source, read on one thread of the capture process."""

    dropped = 0  # frames the source itself knows it missed

    @abstractmethod
    def read(self) -> tuple[float, Image] | None:
        """The next frame with its capture time (ms on the monotonic clock, which the capture
        process shares with labd), or None when the source has ended."""

    def close(self) -> None:
        """Release the device."""


@runtime_checkable
class CaptureSource(Protocol):
    """What to open, picklable; `fps` is the rate asked for (the spool's nominal rate)."""

    @property
    def fps(self) -> float: ...

    def open(self) -> FrameSource: ...
