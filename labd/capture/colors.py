"""Sync colours: names or #RRGGBB, turned into RGB triples."""

from __future__ import annotations

from labd.errors import UsageError

RGB = tuple[int, int, int]

# Eideticker's pure green and red; browsertime's orange lead-in (#DE640D).
PRESETS: dict[str, RGB] = {
    "green": (0, 255, 0),
    "red": (255, 0, 0),
    "orange": (0xDE, 0x64, 0x0D),
    "blue": (0, 0, 255),
    "magenta": (255, 0, 255),
    "white": (255, 255, 255),
    "black": (0, 0, 0),
}


def parse_color(text: str) -> RGB:
    """A preset name or #RRGGBB."""
    name = text.strip().lower()
    if name in PRESETS:
        return PRESETS[name]
    digits = name.removeprefix("#")
    if len(digits) == 6 and all(c in "0123456789abcdef" for c in digits):
        value = int(digits, 16)
        return (value >> 16, (value >> 8) & 0xFF, value & 0xFF)
    raise UsageError(f"colour {text!r}: expected #RRGGBB or one of {', '.join(sorted(PRESETS))}")


def color_name(rgb: RGB) -> str:
    """A preset's name, else #RRGGBB: how a message names a colour the user gave."""
    for name, preset in PRESETS.items():
        if preset == tuple(rgb):
            return name
    return "#{:02X}{:02X}{:02X}".format(*rgb)


def to_bgr(rgb: RGB) -> RGB:
    """OpenCV frames are BGR."""
    return (rgb[2], rgb[1], rgb[0])
