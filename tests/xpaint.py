"""A small X client that paints full-window colours and blocks, for capture and input tests."""

from __future__ import annotations

from Xlib import display


class Painter:
    def __init__(self, name: str, width: int = 640, height: int = 480) -> None:
        self.display = display.Display(name)
        screen = self.display.screen()
        self.window = screen.root.create_window(
            0, 0, width, height, 0, screen.root_depth, override_redirect=True
        )
        self.gc = self.window.create_gc()
        self.window.map()
        self.size = (width, height)
        self.display.sync()

    def rect(
        self, rgb: tuple[int, int, int], x: int = 0, y: int = 0, w: int = 0, h: int = 0
    ) -> None:
        r, g, b = rgb
        self.gc.change(foreground=(r << 16) | (g << 8) | b)  # 24-bit TrueColor
        self.window.fill_rectangle(self.gc, x, y, w or self.size[0], h or self.size[1])
        self.display.sync()

    def close(self) -> None:
        self.display.close()
