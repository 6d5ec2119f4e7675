"""The long-running daemon: lifecycle, signals, systemd, the HTTP side port."""

from typing import TYPE_CHECKING, Any

from labd.daemon.listeners import api_socket_path, reachable
from labd.daemon.statedir import daemon_on, state_dir_id

if TYPE_CHECKING:
    from labd.daemon.app import Daemon

__all__ = ["Daemon", "api_socket_path", "daemon_on", "reachable", "state_dir_id"]


def __getattr__(name: str) -> Any:
    # The daemon brings every component (a second or two of imports); the CLI's client needs
    # only where the daemon listens, so Daemon is imported when first asked for.
    if name == "Daemon":
        from labd.daemon.app import Daemon

        return Daemon
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
