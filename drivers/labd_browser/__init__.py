"""Browser page loads on any desktop: the page-load scenario, the browsers it starts and the
Desktop protocol a platform driver (X11, Windows) provides for it. A library of the desktop
drivers, not a plugin of its own."""

from labd_browser.desktop import Desktop
from labd_browser.pageload import PageLoad, PageLoadParams

__all__ = ["Desktop", "PageLoad", "PageLoadParams"]
