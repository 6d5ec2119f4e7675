"""The phone of `labd markers --serial` and `labd capture --adb`: adbutils' client with a
time-out, so that an adb server that takes the connection and never answers ends the command
with an error naming it instead of hanging it. The server is the one adb itself would use:
$ANDROID_ADB_SERVER_HOST and $ANDROID_ADB_SERVER_PORT, else 127.0.0.1:5037."""

from __future__ import annotations

import os
from typing import Any

from labd.errors import InfrastructureError

ADB_TIMEOUT_S = 10.0  # the Android driver's, for one request to the adb server


def _server() -> str:
    host = os.environ.get("ANDROID_ADB_SERVER_HOST", "127.0.0.1")
    return f"{host}:{os.environ.get('ANDROID_ADB_SERVER_PORT', '5037')}"


def adb_failure(serial: str, error: Exception) -> InfrastructureError:
    """What went wrong talking to `serial`, naming the device and the server."""
    import adbutils

    if isinstance(error, adbutils.AdbTimeout | TimeoutError):
        why = f"the adb server at {_server()} did not answer within {ADB_TIMEOUT_S:g} s"
    else:
        why = f"{error} (adb server {_server()})"
    return InfrastructureError(f"device {serial}: {why}")


def adb_device(serial: str) -> Any:
    """The device `serial` on the adb server; its requests time out after ADB_TIMEOUT_S."""
    import adbutils

    return adbutils.AdbClient(socket_timeout=ADB_TIMEOUT_S).device(serial=serial)
