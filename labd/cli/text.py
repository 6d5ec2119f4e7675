"""Text from outside (a job, a program's stderr, a file, the user) made safe for a terminal.

A job's error quotes what the program wrote; a history file names its series; a device says
why it is quarantined. Printed raw, an escape sequence in any of them recolours the terminal,
retitles its window or clears the screen, and a bidi override reorders what is read. Every
human-readable line the CLI prints passes such text through `shown` (or `markup` for rich),
which writes control characters, bidi controls and lone surrogates as visible escapes
(`\\x1b`, `\\u202e`); JSON output is left exact. `shown` lives in `labd.visible`, below every
layer, because the web console escapes the same characters.
"""

from __future__ import annotations

from labd.visible import shown

__all__ = ["markup", "shown"]


def markup(text: object, *, lines: bool = False) -> str:
    """`shown`, then escaped for rich's markup: "[/]" or "[Errno 2]" is printed, not read."""
    from rich.markup import escape

    return escape(shown(text, lines=lines))
