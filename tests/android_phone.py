"""A stand-in phone behind the adb stand-in: what labd's Android scenarios talk to when no
phone is plugged in. It answers the commands they send, over the real adb host protocol:

- `cmd input` / `input`: tap, swipe (blocking for its duration, as on a phone), motionevent
  DOWN/MOVE/UP, keyevent (BACK, PAGE_DOWN), text; moving the scene (tests/android_scene.py);
- `am start -n PKG/ACT` (an app: a long list; in logcat Raptor's launch marks at the seed's
  offsets and ActivityManager's "Displayed" line); `am start -a android.intent.action.VIEW
  -d URL -p PKG` (the browser fetches the URL for real: through `adb reverse` for the
  phone's 127.0.0.1, else through the proxy in `settings put global http_proxy`, itself
  reached through `adb reverse`); `am force-stop`;
- `wm size`, `dumpsys` (battery, thermalservice, power), `df`, `pm list packages`, `settings`;
- `screenrecord --output-format=h264 --size=WxH -`: the scene rendered at `fps` and encoded by
  ffmpeg (libx264, lossless) as a raw H.264 stream; `screencap -p`: the frame on the display,
  as a PNG.

What it is not: a browser. A page labd serves for sync (`data-labd-sync` on its root) is shown
as its colour; tapping it follows its `data-next` link, as the page's own script would; any
other page is drawn as a long list that paints in four steps over 0.6 s once it arrived.
Navigation Timing comes from the real HTTP exchange, over a minimal DevTools endpoint
(tests/android_devtools.py) when `devtools` is on; off, nothing listens on the socket.
"""

from __future__ import annotations

import contextlib
import http.client
import queue
import re
import shutil
import socket
import subprocess
import threading
import time
from typing import Any
from urllib.parse import urlsplit

import cv2

from tests.adb_standin import FakeDevice
from tests.android_scene import Scene
from tests.markers_log import OFFSETS

KEY_BACK, KEY_PAGE_DOWN = "4", "93"
BROWSERS = ("com.android.chrome", "org.mozilla.firefox")
DEVTOOLS_SOCKET = "chrome_devtools_remote"
BATTERY = "  AC powered: false\n  USB powered: true\n  level: 87\n  temperature: 312\n"
THERMAL = "Thermal Status: 0\n"
DF = (
    "Filesystem 1K-blocks Used Available Use% Mounted on\n/dev/dm-5 115234232 2 95234232 1% /data\n"
)
POWER = "  mWakefulness=Awake\n"
SYNC = re.compile(r"data-labd-sync=['\"]#([0-9a-fA-F]{6})['\"]")
NEXT = re.compile(r"data-next=['\"]([^'\"]+)['\"]")


class Phone(FakeDevice):
    def __init__(
        self,
        serial: str = "emulator-5554",
        size: tuple[int, int] = (360, 640),
        fps: float = 30.0,
        jank_every: int = 0,
        apps: tuple[str, ...] = ("org.example.list",),
        devtools: bool = True,
    ) -> None:
        super().__init__(
            serial,
            props={"ro.product.model": "Stand-in", "ro.build.version.release": "14",
                   "ro.build.version.sdk": "34", "ro.product.cpu.abi": "x86_64"},
            outputs={"dumpsys battery": BATTERY, "dumpsys thermalservice": THERMAL,
                     "df /data": DF, "dumpsys power": POWER},
        )  # fmt: skip
        self.scene = Scene(size, jank_every)
        self.fps = fps
        self.packages = (*BROWSERS, *apps)
        self.foreground = ""  # package in front
        self.proxy = ""
        self.next_url = ""  # where a tap on the sync page goes
        self.navigations: list[dict[str, Any]] = []  # url, status, timing, for DevTools
        self.load_lag_ms = 600.0  # the load event this long after the page is drawn
        self.busy_ms = 0.0  # the page answers no evaluation this long (megabytes parsing)
        self.devtools: Any = None
        if devtools:
            from tests.android_devtools import DevTools

            self.devtools = DevTools(self)
        self.recordings = 0

    # Commands ---------------------------------------------------------------------------

    def answer(self, argv: list[str]) -> tuple[str, int] | None:
        tool = argv[:2] if argv[:1] == ["cmd"] else argv[:1]
        if tool in (["cmd", "input"], ["input"]):
            return self._input(argv[len(tool) :])
        if argv[:2] == ["am", "start"]:
            return self._am_start(argv[2:])
        if argv[:2] == ["am", "force-stop"] and len(argv) == 3:
            if argv[2] == self.foreground:
                self.foreground = ""
                self.scene.show("home")
            return "", 0
        if argv[:2] == ["wm", "size"]:
            return f"Physical size: {self.scene.width}x{self.scene.height}\n", 0
        if argv[:3] == ["pm", "list", "packages"]:
            return "".join(f"package:{p}\n" for p in self.packages), 0
        if argv[:4] == ["settings", "put", "global", "http_proxy"] and len(argv) == 5:
            self.proxy = "" if argv[4] == ":0" else argv[4]
            return "", 0
        if argv[:4] == ["settings", "get", "global", "http_proxy"]:
            return (self.proxy or "null") + "\n", 0
        return None

    def _input(self, args: list[str]) -> tuple[str, int]:
        if not args:
            return "Usage: input [<source>] <command> [<arg>...]\n", 0
        command, numbers = args[0], args[1:]
        try:
            if command == "tap":
                x, y = int(numbers[0]), int(numbers[1])
                self._tap(x, y)
            elif command == "swipe":
                x1, y1, x2, y2 = (int(v) for v in numbers[:4])
                self._swipe(x1, y1, x2, y2, int(numbers[4]) if len(numbers) > 4 else 300)
            elif command == "motionevent":
                self.scene.touch(numbers[0].upper(), float(numbers[1]), float(numbers[2]))
            elif command == "keyevent":
                self._key(numbers[0])
            elif command != "text":
                return f"Error: Unknown command: {command}\n", 1
        except (IndexError, ValueError):
            return f"Error: bad arguments for {command}: {' '.join(numbers)}\n", 1
        return "", 0

    def _tap(self, x: int, y: int) -> None:
        if self.scene.mode == "color" and self.next_url:
            self.view(self.next_url, self.foreground)
        else:
            self.scene.tap(x, y)

    def _swipe(self, x1: int, y1: int, x2: int, y2: int, duration_ms: int) -> None:
        """Finger down, moves at 120 Hz, up: the command returns when the finger lifts."""
        steps = max(1, int(duration_ms / 1000 * 120))
        began = time.monotonic()
        self.scene.touch("DOWN", x1, y1)
        for i in range(1, steps + 1):
            wait = began + duration_ms / 1000 * i / steps - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            x, y = x1 + (x2 - x1) * i / steps, y1 + (y2 - y1) * i / steps
            self.scene.touch("MOVE" if i < steps else "UP", x, y)

    def _key(self, code: str) -> None:
        if code in (KEY_BACK, "KEYCODE_BACK"):
            self.foreground = ""
            self.scene.show("home")
        elif code in (KEY_PAGE_DOWN, "KEYCODE_PAGE_DOWN"):
            view = self.scene.height - self.scene.viewport_top()
            self.scene.touch("DOWN", 10, view)
            self.scene.touch("MOVE", 10, 10)
            self.scene.touch("CANCEL", 10, 10)

    def _am_start(self, args: list[str]) -> tuple[str, int]:
        options: dict[str, str] = {}
        words = iter(args)
        for word in words:
            if word in ("-a", "-d", "-n", "-p", "-c", "-f"):
                options[word] = next(words, "")
        if "-n" in options:
            package, _, activity = options["-n"].partition("/")
            if package not in self.packages or not activity:
                return f"Error: Activity class {{{options['-n']}}} does not exist.\n", 1
            self.foreground = package
            self.scene.show("app")
            self._launch_marks(package, options["-n"])
            return "Starting: Intent { cmp=" + options["-n"] + " }\nStatus: ok\n", 0
        if options.get("-a") == "android.intent.action.VIEW" and "-d" in options:
            package = options.get("-p", BROWSERS[0])
            if package not in BROWSERS or package not in self.packages:
                return f"Error: no browser {package} to view {options['-d']}\n", 1
            self.view(options["-d"], package)
            return "Starting: Intent { act=android.intent.action.VIEW }\n", 0
        return f"Error: cannot start {' '.join(args)}\n", 1

    def _launch_marks(self, package: str, component: str) -> None:
        """What a launch logs: the launcher's appLaunch mark and the app's lifecycle marks
        (Raptor's PerformanceTiming lines, at the seed's offsets), then ActivityManager's
        "Displayed" line."""
        epoch = int(time.time() * 1000)
        stamp = time.strftime("%m-%d %H:%M:%S.000")
        entry = f"{stamp}  2000  2000 I PerformanceTiming: Performance Entry: "
        lines = [f"{entry}launcher|mark|appLaunch@{package}|1.0|0.000000|{epoch}"]
        lines += [
            f"{entry}{package}|mark|{name}|{offset}.0|0.000000|{epoch + offset}"
            for name, offset in OFFSETS.items()
        ]
        lines.append(f"{stamp}  1000  1000 I ActivityTaskManager: Displayed {component}: +212ms")
        self.emit(*lines)

    # The browser ------------------------------------------------------------------------

    def view(self, url: str, package: str) -> None:
        """Navigate: the page is fetched on a thread of its own (am start returns at once)."""
        self.foreground = package
        self.next_url = ""
        started = time.monotonic()
        threading.Thread(target=self._load, args=(url, started), daemon=True).start()

    def _load(self, url: str, started: float) -> None:
        timing: dict[str, Any] = {"url": url, "status": 0}
        try:
            status, body, first_byte = self._fetch(url)
        except OSError as e:
            timing["error"] = str(e)
            self.navigations.append(timing)
            self.scene.show("error")
            return
        done = time.monotonic()
        timing |= {"status": status, "responseStart": (first_byte - started) * 1000,
                   "domInteractive": (done - started) * 1000,
                   "domContentLoaded": (done - started) * 1000,
                   "load": (done - started) * 1000 + self.load_lag_ms,
                   "started": started, "empty": not body}  # fmt: skip
        self.navigations.append(timing)
        text = body.decode("utf-8", "replace")
        if (sync := SYNC.search(text)) is not None:
            rgb = bytes.fromhex(sync.group(1))
            self.scene.show("color", (rgb[0], rgb[1], rgb[2]))
            if (link := NEXT.search(text)) is not None:
                self.next_url = link.group(1).replace("&amp;", "&")
        elif status >= 400:
            self.scene.show("error")
        else:
            self.scene.show("page")

    def _fetch(self, url: str) -> tuple[int, bytes, float]:
        """A GET as the phone would make it: its own loopback through `adb reverse`, anything
        else through the configured proxy (itself on the phone's loopback)."""
        parts = urlsplit(url)
        if parts.hostname in ("127.0.0.1", "localhost"):
            port = self.reversed_port(parts.port or 80)
            if port is None:
                raise OSError(f"connection refused: nothing on the phone's port {parts.port}")
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        elif self.proxy:
            proxy_port = self.reversed_port(int(self.proxy.rsplit(":", 1)[1]))
            if proxy_port is None:
                raise OSError(f"proxy {self.proxy}: connection refused (no adb reverse)")
            connection = http.client.HTTPConnection("127.0.0.1", proxy_port, timeout=30)
            path = url
        else:
            raise OSError(f"{parts.hostname}: no network (no proxy set)")
        try:
            connection.request("GET", path, headers={"Host": parts.netloc})
            response = connection.getresponse()
            first_byte = time.monotonic()
            return response.status, response.read(), first_byte
        finally:
            connection.close()

    def abstract_socket(self, name: str) -> tuple[str, int] | None:
        if name == DEVTOOLS_SOCKET and self.devtools is not None:
            return self.devtools.address()
        return None

    # Screen -----------------------------------------------------------------------------

    def stream(self, command: str, conn: socket.socket) -> bool:
        argv = command.split()
        if argv[:1] == ["screencap"]:
            ok, png = cv2.imencode(".png", self.scene.screenshot())
            conn.sendall(png.tobytes() if ok else b"")
            return True
        if argv[:1] == ["screenrecord"] and "--output-format=h264" in argv and argv[-1] == "-":
            self._screenrecord(argv, conn)
            return True
        return False

    def _screenrecord(self, argv: list[str], conn: socket.socket) -> None:
        """Frames at `fps`, encoded as they are rendered, streamed until the reader leaves or
        --time-limit passes."""
        size = next((a.split("=", 1)[1] for a in argv if a.startswith("--size=")), "")
        width, height = (int(v) for v in size.split("x")) if size else (0, 0)
        limits = [float(a.split("=", 1)[1]) for a in argv if a.startswith("--time-limit=")]
        limit = limits[0] if limits else 180.0
        if (width, height) != (self.scene.width, self.scene.height):
            conn.sendall(f"screenrecord: unsupported size {size}\n".encode())
            return
        ffmpeg = shutil.which("ffmpeg")
        assert ffmpeg is not None, "the stand-in's screenrecord needs ffmpeg"
        # Unlike a phone's, this screenrecord sends every frame, repeats too. Lossless, so a
        # repeat decodes as its frame did: lossy, the encoder spends a repeat's bits refining
        # the frame before (most after a fast fling, and at each keyframe), and the analysis
        # rightly sees a change where the scene repeated a frame on purpose.
        encoder = subprocess.Popen(
            [ffmpeg, "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "bgr24", "-s", size,
             "-r", str(self.fps), "-i", "pipe:0", "-c:v", "libx264", "-preset", "ultrafast",
             "-tune", "zerolatency", "-qp", "0", "-pix_fmt", "yuv420p", "-f", "h264", "pipe:1"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        )  # fmt: skip
        self.recordings += 1
        frames: queue.Queue[bytes | None] = queue.Queue(maxsize=int(self.fps * 2))
        stop = threading.Event()
        painter = threading.Thread(target=self._paint, args=(frames, stop, limit), daemon=True)
        writer = threading.Thread(target=_write, args=(frames, encoder), daemon=True)
        painter.start()
        writer.start()
        assert encoder.stdout is not None
        try:
            while chunk := encoder.stdout.read1(65536):
                conn.sendall(chunk)
        except OSError:
            pass  # the reader left: screenrecord ends
        finally:
            stop.set()
            encoder.kill()
            encoder.wait()
            painter.join(5)
            writer.join(5)

    def _paint(
        self, frames: queue.Queue[bytes | None], stop: threading.Event, limit: float
    ) -> None:
        """Frames rendered on the display's beat, whether or not the encoder keeps up (a
        frame it cannot take is lost, as a real encoder's would be)."""
        interval = 1 / self.fps
        began = time.monotonic()
        tick = began
        try:
            while not stop.is_set() and time.monotonic() - began < limit:
                with contextlib.suppress(queue.Full):  # drawn for its tick, even when late
                    frames.put_nowait(self.scene.render(at=tick).tobytes())
                self.scene.beating = True  # screencap reads this recording's frames from now
                tick += interval
                time.sleep(max(0.0, tick - time.monotonic()))
        finally:
            self.scene.beating = False
            frames.put(None)


def _write(frames: queue.Queue[bytes | None], encoder: subprocess.Popen[bytes]) -> None:
    assert encoder.stdin is not None
    try:
        while (frame := frames.get()) is not None:
            encoder.stdin.write(frame)
            encoder.stdin.flush()
    except (OSError, ValueError):
        pass  # the encoder was stopped
    finally:
        with contextlib.suppress(OSError):
            encoder.stdin.close()
