"""The few user32 calls the Windows driver makes beyond SendInput, with ctypes only: the
screen's size, whether the input desktop is usable (not locked, no UAC prompt), whether a
process shows a window, and a topmost one-colour window over the screen (the end screen).

`Win32Api` is the seam: the driver takes any object with these methods, so everything above
it runs on Linux in tests (against tests/windows_standin.py); `Win32` needs Windows.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from collections.abc import Sequence
from typing import Any, Protocol

from labd.sdk import InfrastructureError
from labd_windows import sendinput

RGB = tuple[int, int, int]


class Win32Api(Protocol):
    def screen_size(self) -> tuple[int, int]: ...

    def send(self, events: Sequence[sendinput.INPUT]) -> None: ...

    def input_desktop_problem(self) -> str | None:
        """Why input cannot be injected now (a locked session, a UAC prompt), or None."""

    def has_window(self, pid: int) -> bool: ...

    def overlay(self, rgb: RGB, size: tuple[int, int]) -> object:
        """Shows the window; a handle for `remove`."""

    def remove(self, overlay: object) -> None: ...


SM_CXSCREEN, SM_CYSCREEN = 0, 1
DESKTOP_SWITCHDESKTOP = 0x0100
WS_POPUP, WS_VISIBLE = 0x80000000, 0x10000000
WS_EX_TOPMOST, WS_EX_TOOLWINDOW, WS_EX_NOACTIVATE = 0x8, 0x80, 0x08000000
HWND_TOPMOST = -1
SWP_SHOWWINDOW = 0x40
WM_QUIT = 0x12


class Win32:
    """The real calls (Windows only)."""

    def __init__(self) -> None:
        if sys.platform != "win32":
            raise InfrastructureError("the Win32 API exists on Windows only")
        from ctypes import wintypes

        self.w = wintypes
        self.user32: Any = ctypes.WinDLL("user32", use_last_error=True)  # type: ignore[attr-defined,unused-ignore]
        self.kernel32: Any = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined,unused-ignore]
        self.gdi32: Any = ctypes.WinDLL("gdi32", use_last_error=True)  # type: ignore[attr-defined,unused-ignore]
        # Pixels as the screen has them: capture (mss) and input then agree on coordinates.
        self.user32.SetProcessDPIAware()
        self.user32.OpenInputDesktop.restype = wintypes.HANDLE
        self.user32.CloseDesktop.argtypes = [wintypes.HANDLE]
        self.user32.SwitchDesktop.argtypes = [wintypes.HANDLE]

    def screen_size(self) -> tuple[int, int]:
        return self.user32.GetSystemMetrics(SM_CXSCREEN), self.user32.GetSystemMetrics(SM_CYSCREEN)

    def send(self, events: Sequence[sendinput.INPUT]) -> None:
        sendinput.send(events)

    def input_desktop_problem(self) -> str | None:
        desktop = self.user32.OpenInputDesktop(0, False, DESKTOP_SWITCHDESKTOP)
        if not desktop:
            return "the input desktop cannot be opened (a UAC prompt or another session?)"
        try:
            if not self.user32.SwitchDesktop(desktop):
                return "the session is locked: input would go nowhere"
        finally:
            self.user32.CloseDesktop(desktop)
        return None

    def has_window(self, pid: int) -> bool:
        w = self.w
        found = []
        callback_type = ctypes.WINFUNCTYPE(w.BOOL, w.HWND, w.LPARAM)  # type: ignore[attr-defined,unused-ignore]

        def visit(hwnd: int, _: int) -> bool:
            owner = w.DWORD()
            self.user32.GetWindowThreadProcessId(hwnd, ctypes.byref(owner))
            if owner.value == pid and self.user32.IsWindowVisible(hwnd):
                found.append(hwnd)
                return False  # stop enumerating
            return True

        self.user32.EnumWindows(callback_type(visit), 0)
        return bool(found)

    def overlay(self, rgb: RGB, size: tuple[int, int]) -> object:
        window = _Overlay(self, rgb, size)
        window.show()
        return window

    def remove(self, overlay: object) -> None:
        assert isinstance(overlay, _Overlay)
        overlay.close()


class _Overlay:
    """A window created, pumped and destroyed by a thread of its own: a window belongs to its
    thread, and asyncio's worker threads differ from one call to the next."""

    def __init__(self, api: Win32, rgb: RGB, size: tuple[int, int]) -> None:
        self.api, self.rgb, self.size = api, rgb, size
        self.ready = threading.Event()
        self.thread_id = 0
        self.error = ""
        self.thread = threading.Thread(target=self._run, name="labd-overlay", daemon=True)

    def show(self) -> None:
        self.thread.start()
        if not self.ready.wait(10) or self.error:
            why = self.error or "no window within 10 s"
            raise InfrastructureError(f"the end screen could not be shown: {why}")

    def close(self) -> None:
        self.api.user32.PostThreadMessageW(self.thread_id, WM_QUIT, 0, 0)
        self.thread.join(10)

    def _run(self) -> None:
        w, user32 = self.api.w, self.api.user32
        wndproc = ctypes.WINFUNCTYPE(w.LPARAM, w.HWND, w.UINT, w.WPARAM, w.LPARAM)  # type: ignore[attr-defined,unused-ignore]
        user32.DefWindowProcW.argtypes = [w.HWND, w.UINT, w.WPARAM, w.LPARAM]
        user32.DefWindowProcW.restype = w.LPARAM

        class WNDCLASSW(ctypes.Structure):
            _fields_ = [("style", w.UINT), ("lpfnWndProc", wndproc), ("cbClsExtra", ctypes.c_int),
                        ("cbWndExtra", ctypes.c_int), ("hInstance", w.HINSTANCE),
                        ("hIcon", w.HICON), ("hCursor", w.HANDLE), ("hbrBackground", w.HBRUSH),
                        ("lpszMenuName", w.LPCWSTR), ("lpszClassName", w.LPCWSTR)]  # fmt: skip

        self.thread_id = self.api.kernel32.GetCurrentThreadId()
        r, g, b = self.rgb
        brush = self.api.gdi32.CreateSolidBrush(r | g << 8 | b << 16)  # COLORREF is 0x00BBGGRR
        name = f"labd-overlay-{self.thread_id}"
        instance = self.api.kernel32.GetModuleHandleW(None)
        proc = wndproc(user32.DefWindowProcW)
        klass = WNDCLASSW(lpfnWndProc=proc, hInstance=instance, hbrBackground=brush,
                          lpszClassName=name)  # fmt: skip
        user32.CreateWindowExW.restype = w.HWND
        if not user32.RegisterClassW(ctypes.byref(klass)):
            self.error = f"RegisterClassW failed ({ctypes.get_last_error()})"  # type: ignore[attr-defined,unused-ignore]
            self.ready.set()
            return
        width, height = self.size
        hwnd = user32.CreateWindowExW(WS_EX_TOPMOST | WS_EX_TOOLWINDOW | WS_EX_NOACTIVATE, name,
                                      None, WS_POPUP | WS_VISIBLE, 0, 0, width, height, None,
                                      None, instance, None)  # fmt: skip
        if not hwnd:
            self.error = f"CreateWindowExW failed ({ctypes.get_last_error()})"  # type: ignore[attr-defined,unused-ignore]
        else:
            user32.SetWindowPos(hwnd, HWND_TOPMOST, 0, 0, width, height, SWP_SHOWWINDOW)
            user32.UpdateWindow(hwnd)  # painted with the class brush now, not when a loop runs
        self.ready.set()
        message = w.MSG()
        while hwnd and user32.GetMessageW(ctypes.byref(message), None, 0, 0) > 0:
            user32.TranslateMessage(ctypes.byref(message))
            user32.DispatchMessageW(ctypes.byref(message))
        if hwnd:
            user32.DestroyWindow(hwnd)
        user32.UnregisterClassW(name, instance)
        self.api.gdi32.DeleteObject(brush)
