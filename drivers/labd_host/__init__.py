"""The host driver: the machine labd runs on, as a device, with the `command` scenario."""

from labd_host.driver import HostDriver

__all__ = ["HostDriver"]
