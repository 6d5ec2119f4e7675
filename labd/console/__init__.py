"""The web console: the lab at a glance in a browser, served by the daemon on the side port."""

from labd.console.app import PREFIX, console_application

__all__ = ["PREFIX", "console_application"]
