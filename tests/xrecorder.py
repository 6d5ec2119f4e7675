"""A small X client that records the input it receives, one JSON line per event on stdout,
with the receiving time (CLOCK_MONOTONIC, shared by every process of the machine).

Run: python -m tests.xrecorder DISPLAY   (prints {"ready": true} once it has the focus)
"""

from __future__ import annotations

import json
import sys
import time

from Xlib import XK, X, display

# Names of the common keysyms ("Return", "Control_L", "F12"), from the XK module.
NAMES: dict[int, str] = {}
for _name, _value in vars(XK).items():
    if _name.startswith("XK_"):
        NAMES.setdefault(_value, _name[3:])  # the first name, not an alias (F12, not L2)


def char_of(keysym: int) -> str | None:
    if 0x20 <= keysym <= 0x7E or 0xA0 <= keysym <= 0xFF:
        return chr(keysym)
    if keysym & 0xFF000000 == 0x01000000:
        return chr(keysym & 0xFFFFFF)
    return {XK.XK_Return: "\n", XK.XK_Tab: "\t"}.get(keysym)


def main(name: str) -> None:
    d = display.Display(name)
    screen = d.screen()
    window = screen.root.create_window(
        0, 0, screen.width_in_pixels, screen.height_in_pixels, 0, screen.root_depth,
        override_redirect=True, background_pixel=screen.white_pixel,
        event_mask=X.KeyPressMask | X.ButtonPressMask | X.ButtonReleaseMask | X.PointerMotionMask,
    )  # fmt: skip
    window.set_wm_name("labd input recorder")
    window.set_wm_class("recorder", "LabdRecorder")
    window.map()
    d.sync()
    window.set_input_focus(X.RevertToParent, X.CurrentTime)
    d.sync()
    numlock = d.keysym_to_keycode(XK.XK_Num_Lock)
    modifiers = d.get_modifier_mapping()
    numlock_mask = next((1 << i for i, codes in enumerate(modifiers) if numlock in codes), 0)
    print(json.dumps({"ready": True, "window": window.id}), flush=True)
    while True:
        event = d.next_event()
        now = time.monotonic()
        if event.type == X.MappingNotify:
            d.refresh_keyboard_mapping(event)
            continue
        record: dict[str, object] = {"t": now}
        if event.type == X.KeyPress:
            shifted = bool(event.state & X.ShiftMask)
            plain = d.keycode_to_keysym(event.detail, 0)
            if event.state & X.LockMask and plain < 0x100 and chr(plain).isalpha():
                shifted = not shifted  # Caps Lock: the other case of a letter
            second = d.keycode_to_keysym(event.detail, 1)
            if event.state & numlock_mask and 0xFF80 <= second <= 0xFFBD:
                shifted = not shifted  # Num Lock: a keypad key's digit
            index = 1 if shifted else 0
            keysym = d.keycode_to_keysym(event.detail, index) or d.keycode_to_keysym(
                event.detail, 0
            )
            record |= {"type": "key", "char": char_of(keysym), "name": NAMES.get(keysym),
                       "ctrl": bool(event.state & X.ControlMask)}  # fmt: skip
        elif event.type in (X.ButtonPress, X.ButtonRelease):
            kind = "press" if event.type == X.ButtonPress else "release"
            record |= {"type": kind, "button": event.detail, "x": event.event_x, "y": event.event_y}
        elif event.type == X.MotionNotify:
            record |= {"type": "motion", "x": event.event_x, "y": event.event_y}
        else:
            continue
        print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
