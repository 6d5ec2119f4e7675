"""Power control through a USB serial relay board (LCUS, CH340 and similar), on pyserial.

Each board speaks its own bytes, so the on and off commands are configured per channel, as
hex: the LCUS-1 board's channel 1 is `on = "A0 01 01 A2"`, `off = "A0 01 00 A1"`.
"""

from labd_serial_relay.relay import SerialRelay

__all__ = ["SerialRelay"]
