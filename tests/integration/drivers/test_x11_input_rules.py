"""X11 input's edge cases on Xvfb: characters the keyboard map lacks, typed right however many
there are; a display without a spare keycode; labd.sdk's one rule for input values (the
Windows driver's test is tests/unit/drivers/test_input_rules.py)."""

from __future__ import annotations

import asyncio
import math
import signal
import subprocess
import sys
import time

import pytest
from Xlib import XK, X, display

from labd.errors import UsageError
from labd_x11 import X11Input, xinput
from tests.integration.drivers.test_x11_input import Recorder


def typed(recorder: Recorder) -> str:
    return "".join(e["char"] or "" for e in recorder.until("F12") if e["type"] == "key")


def spare_keycodes(name: str) -> list[int]:
    """The keycodes of the display's keyboard map that have no symbol."""
    other = display.Display(name)
    first = other.display.info.min_keycode
    mapping = other.get_keyboard_mapping(first, other.display.info.max_keycode - first + 1)
    other.close()
    return [code for code, syms in enumerate(mapping, first) if not any(syms)]


def typed_then_killed(name: str, text: str) -> tuple[int, list[int]]:
    """A labd process that types `text` on display `name` and is killed (SIGKILL) before it
    can close: (its holder window's id, the keycodes it held)."""
    script = (
        "import os, sys; from labd_x11 import X11Input\n"
        "x = X11Input(sys.argv[1]); x.text(sys.argv[2])\n"
        "print(x.keycodes.holder.id, *x.keycodes.held, flush=True); os.kill(os.getpid(), 9)"
    )
    killed = subprocess.run(
        [sys.executable, "-c", script, name, text], timeout=60, capture_output=True, text=True
    )
    assert killed.returncode == -signal.SIGKILL
    holder, *held = map(int, killed.stdout.split())
    return holder, held


def test_more_missing_characters_than_spare_keycodes_are_typed_right(
    desktop: tuple[X11Input, Recorder],
) -> None:
    """80 CJK characters without a delay, 19 spare keycodes on Xvfb: a keycode is remapped
    again only once clients have read the earlier key events (some were typed wrong)."""
    x11, recorder = desktop
    assert len(spare_keycodes(x11.name)) < 80
    text = "".join(chr(0x4E00 + 7 * i) for i in range(80))
    x11.text(text)
    x11.key("F12")
    assert typed(recorder) == text


def test_a_text_needing_more_remaps_than_fit_in_a_call_is_refused_before_any_key(
    desktop: tuple[X11Input, Recorder],
) -> None:
    """10,000 distinct CJK characters took every spare keycode about 500 times, 1.2 s each:
    the thread blocked 10 minutes, which a job's time-out cannot stop. Refused at once, saying
    why, and nothing of it typed."""
    x11, recorder = desktop
    text = "".join(chr(0x4E00 + i) for i in range(10_000))
    started = time.monotonic()
    with pytest.raises(UsageError, match=r"10000 distinct characters its keyboard lacks"):
        x11.text(text)
    assert time.monotonic() - started < 5
    x11.text("ok")
    x11.key("F12")
    assert typed(recorder) == "ok"


def test_missing_characters_coming_back_too_often_stop_at_the_call_s_bound(
    desktop: tuple[X11Input, Recorder], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Few distinct characters, each coming back after the spare keycodes took others: every
    round waits for the clients, and the call stops at its bound (here 4 s) saying why; what
    the keyboard has is still typed after it."""
    monkeypatch.setattr(xinput, "MAX_INPUT_S", 4.0)
    x11, recorder = desktop
    spare = len(spare_keycodes(x11.name))
    text = "".join(chr(0x4E00 + i) for i in range(spare + 4)) * 10
    started = time.monotonic()
    with pytest.raises(UsageError, match="came back too often"):
        x11.text(text)
    assert time.monotonic() - started < 8
    x11.text("ok")
    x11.key("F12")
    assert typed(recorder).endswith("ok")


async def test_a_display_without_a_spare_keycode_is_a_usage_error(
    desktop: tuple[X11Input, Recorder],
) -> None:
    """The job's value cannot be typed there: the job fails, the display is not blamed (it was
    an InfrastructureError, and three of them quarantined it). Nothing of the text is typed,
    and no modifier is left down (ctrl stayed pressed: every later key came as ctrl+key). Was
    a bare StopIteration once, which a Future cannot take: the awaiting code hung."""
    x11, recorder = desktop
    other = display.Display(x11.name)
    for i, code in enumerate(spare_keycodes(x11.name)):  # give each spare keycode a symbol
        other.change_keyboard_mapping(code, [(0x01002600 + i, 0x01002600 + i)])
    other.sync()
    try:
        with pytest.raises(UsageError, match="no spare keycode to type '日'"):
            await asyncio.wait_for(asyncio.to_thread(x11.text, "abc日"), 10)
        with pytest.raises(UsageError, match="to type 'é' with"):  # the character, not 0xe9
            x11.key("ctrl+é")
        control = other.keysym_to_keycode(XK.XK_Control_L)
        assert not other.query_keymap()[control // 8] & (1 << control % 8)  # not held down
        x11.text("ok")  # what the map has is still typed
        x11.key("F12")
        keys = [e for e in recorder.until("F12") if e["type"] == "key"]
        assert [(k["char"], k["ctrl"]) for k in keys[:2]] == [("o", False), ("k", False)]
    finally:
        other.close()


def test_keycodes_a_killed_process_held_are_emptied_by_the_next_one(
    desktop: tuple[X11Input, Recorder],
) -> None:
    """kill -9 while typing left every spare keycode mapped: the display had none left and the
    retried job failed on it. The next input to open the display (a health check) frees them,
    and types those characters again right (it used the keycodes it had read them on, now
    empty: nothing arrived)."""
    x11, recorder = desktop
    spare = spare_keycodes(x11.name)
    typed_then_killed(x11.name, "日本語の文字")
    assert len(spare_keycodes(x11.name)) == len(spare) - 6  # left mapped
    fresh = X11Input(x11.name)
    try:
        assert spare_keycodes(x11.name) == spare
        fresh.text("日本語の文字")
        fresh.key("F12")
        assert typed(recorder) == "日本語の文字" * 2  # the killed process's, then these
    finally:
        fresh.close()


def test_a_dead_holder_s_window_id_given_to_another_client_does_not_keep_its_keycodes(
    desktop: tuple[X11Input, Recorder],
) -> None:
    """The X server gives a killed client's ids to the next client: a window made by it had
    the dead holder's id, and its keycodes stayed held for as long as that client lived."""
    x11, _ = desktop
    spare = spare_keycodes(x11.name)
    holder, _ = typed_then_killed(x11.name, "日本")
    squatter = (
        "import sys; from Xlib import display\n"
        "d = display.Display(sys.argv[1]); w = d.screen().root.create_window(0, 0, 1, 1, 0, 0)\n"
        "d.sync(); print(w.id, flush=True); sys.stdin.read()"
    )
    client = subprocess.Popen(
        [sys.executable, "-c", squatter, x11.name],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert client.stdout is not None
        assert int(client.stdout.readline()) == holder  # the same id, another client
        X11Input(x11.name).close()
        assert spare_keycodes(x11.name) == spare
    finally:
        client.kill()
        client.wait()


def test_two_processes_typing_on_one_display_take_different_keycodes(
    desktop: tuple[X11Input, Recorder],
) -> None:
    """One opened while the other held keycodes typed the other's characters with them; its
    next batch turned them into its own (28 of 514 characters wrong)."""
    x11, recorder = desktop
    spare = spare_keycodes(x11.name)
    x11.text("日本")
    other = X11Input(x11.name)
    try:
        other.text("中文日本")  # 日本 on x11's keycodes is not other's to use
        x11.text("日本")
        x11.key("F12")
        assert typed(recorder) == "日本中文日本日本"
        assert len(other.remapped) == 4  # its own keycodes for all four
        assert set(other.remapped.values()).isdisjoint(x11.keycodes.held)
        assert set(x11.keycodes.held).isdisjoint(other.keycodes.held)
    finally:
        other.close()
    assert len(spare_keycodes(x11.name)) == len(spare) - len(x11.keycodes.held)  # its own back


def test_keycodes_a_new_layout_took_are_noticed(desktop: tuple[X11Input, Recorder]) -> None:
    """setxkbmap emptied the keycodes labd held: later text went to empty keycodes, silently.
    A keycode given a user's key since is neither typed with nor emptied by labd."""
    _, recorder = desktop
    x11 = X11Input(desktop[0].name)
    x11.text("中文é")
    other = display.Display(x11.name)
    emptied, taken = sorted(x11.keycodes.held)[:2]
    other.change_keyboard_mapping(emptied, [(0, 0)])  # as a new layout does
    other.change_keyboard_mapping(taken, [(XK.XK_F13, XK.XK_F13)])  # a user's key now
    other.sync()
    x11.text("中文é")
    x11.key("F12")
    assert typed(recorder) == "中文é中文é"
    x11.close()
    assert other.get_keyboard_mapping(taken, 1)[0][0] == XK.XK_F13
    other.close()


def test_a_dead_process_s_keycode_given_a_user_s_key_is_left_alone(
    desktop: tuple[X11Input, Recorder],
) -> None:
    x11, _ = desktop
    _, (code, *_) = typed_then_killed(x11.name, "日本")
    other = display.Display(x11.name)
    other.change_keyboard_mapping(code, [(XK.XK_adiaeresis, XK.XK_Adiaeresis)])  # xmodmap
    other.sync()
    X11Input(x11.name).close()  # the next labd process, a health check
    assert list(other.get_keyboard_mapping(code, 1)[0][:2]) == [XK.XK_adiaeresis, XK.XK_Adiaeresis]
    other.close()


def test_a_second_process_typing_finds_keycodes_left(desktop: tuple[X11Input, Recorder]) -> None:
    """The first took every spare keycode for its 40 characters: the second failed at once."""
    x11, recorder = desktop
    other = X11Input(x11.name)
    try:
        text = "".join(chr(0x4E00 + 7 * i) for i in range(40))
        x11.text(text)
        other.text("Цж")
        x11.key("F12")
        assert typed(recorder) == text + "Цж"
    finally:
        other.close()


def test_caps_lock_does_not_change_the_text(desktop: tuple[X11Input, Recorder]) -> None:
    """Caps Lock left on typed later text in the other case; it is off while labd types and
    on again after."""
    x11, recorder = desktop
    x11.key("Caps_Lock")
    x11.text("Hello, World")
    x11.key("a")
    x11.key("F12")
    assert typed(recorder) == "Hello, Worlda"
    assert x11.root.query_pointer().mask & X.LockMask  # still on


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda x: x.key(""), "key '': expected a key name"),
        (lambda x: x.key("ctrl+"), "key 'ctrl\\+': no key after the modifiers"),
        (lambda x: x.click(40000, 5), "x=40000: expected a whole number of pixels from 0 to 639"),
        (lambda x: x.click(5, -40000), "y=-40000"),
        (lambda x: x.click(1.5, 5), "x=1.5"),
        (lambda x: x.move(640, 0), "x=640"),
        (lambda x: x.drag(0, 0, 10**6, 0), "x=1000000"),
        (lambda x: x.text("a", delay_ms=-1), "delay_ms=-1: expected a finite number from 0 to 1"),
        (lambda x: x.text("a" * 10_001), "text of 10001 characters: at most 10000"),
        (lambda x: x.text("a" * 601, delay_ms=100), r"would take 60\.1 s: at most 60 s"),
        (lambda x: x.drag(0, 0, 5, 5, duration_s=1e9), "duration_s=1000000000.0: expected"),
        (lambda x: x.text("a", delay_ms=math.nan), "delay_ms=nan"),
        (lambda x: x.drag(0, 0, 5, 5, duration_s=-1), "duration_s=-1"),
        (lambda x: x.drag(0, 0, 5, 5, duration_s=math.nan), "duration_s=nan"),
        (lambda x: x.scroll("down", 2**25), "clicks=33554432"),
        (lambda x: x.text("a\ud800"), "'\\\\ud800' at position 1 cannot be typed"),
    ],
)
def test_bad_values_are_usage_errors_naming_the_argument(
    xvfb: str, call: object, error: str
) -> None:
    x11 = X11Input(xvfb)
    try:
        with pytest.raises(UsageError, match=error):
            call(x11)  # type: ignore[operator]
    finally:
        x11.close()


def test_the_shared_key_names_work(desktop: tuple[X11Input, Recorder]) -> None:
    x11, recorder = desktop
    combos = ("pageup", "Page_Up", "ctrl+.", "Enter", "esc", "ctrl + l", "CTRL+T", "KP_Enter",
              "KP_7", "KP_Decimal", "F12")  # fmt: skip
    for combo in combos:
        x11.key(combo)
    keys = [e for e in recorder.until("F12") if e["type"] == "key"]
    assert [(k["name"], k["ctrl"]) for k in keys] == [
        ("Page_Up", False), ("Page_Up", False), ("Control_L", False), ("period", True),
        ("Return", False), ("Escape", False), ("Control_L", False), ("l", True),
        ("Control_L", False), ("t", True),  # ctrl and t, as menus write it: not ctrl+shift+t
        ("KP_Enter", False),
        ("Num_Lock", False), ("KP_7", False), ("Num_Lock", False),  # the digit, not KP_Home
        ("KP_Decimal", False), ("F12", False),
    ]  # fmt: skip
    assert not x11.root.query_pointer().mask & X.Mod2Mask  # Num Lock off again, as it was


def test_a_keypad_digit_without_a_num_lock_modifier_is_the_digit(
    desktop: tuple[X11Input, Recorder],
) -> None:
    """A display whose modifiers have no Num Lock (a minimal or remapped X server): KP_7 came
    as KP_Home, silently. Shift picks the digit there, as X's core rule and XKB's keypad type
    both say."""
    x11, recorder = desktop
    other = display.Display(x11.name)
    modifiers = [list(codes) for codes in other.get_modifier_mapping()]
    numlock = other.keysym_to_keycode(XK.XK_Num_Lock)
    without = [[code for code in codes if code != numlock] for codes in modifiers]
    assert without != modifiers  # Xvfb has Num Lock as a modifier
    assert other.set_modifier_mapping(without) == X.MappingSuccess
    other.sync()
    try:
        x11.key("KP_7")
        x11.key("F12")
        keys = [e["name"] for e in recorder.until("F12") if e["type"] == "key"]
        assert "KP_7" in keys and "KP_Home" not in keys
    finally:
        other.set_modifier_mapping(modifiers)
        other.close()
