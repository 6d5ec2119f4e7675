"""Fixtures the driver tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from labd_x11 import X11Input
from tests.integration.drivers.test_x11_input import Recorder


@pytest.fixture
def desktop(xvfb: str) -> Iterator[tuple[X11Input, Recorder]]:
    """X11 input on a fresh Xvfb, and a client recording what reaches it."""
    recorder = Recorder(xvfb)
    x11 = X11Input(xvfb)
    yield x11, recorder
    x11.close()
    recorder.close()
