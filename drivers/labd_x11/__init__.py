"""X11 desktops: input through XTEST on a DISPLAY (python-xlib), page loads in a browser."""

from labd_x11.desktop import X11Desktop
from labd_x11.driver import X11Driver, X11Options
from labd_x11.xinput import Window, X11Input, char_keysym

__all__ = ["Window", "X11Desktop", "X11Driver", "X11Input", "X11Options", "char_keysym"]
