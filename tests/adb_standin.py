"""A stand-in for the adb server: the adb host protocol on a local port, as adbutils speaks it,
with scripted devices behind it. No phone is needed, but every byte crosses a real socket in
the real protocol (4-hex-digit length prefixes, OKAY/FAIL, transports, shell and exec
services, reverse forwarding, device tracking).

A device's shell runs commands the way `sh -c` would split them (shlex), so a test sees the
exact argument vector a phone would have received.
"""

from __future__ import annotations

import contextlib
import re
import shlex
import socket
import socketserver
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

Handler = Callable[[list[str]], str]


@dataclass
class FakeDevice:
    serial: str
    props: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)  # first word(s) -> output
    received: list[list[str]] = field(default_factory=list)  # every command's argv
    reverses: list[str] = field(default_factory=list)
    logcat: list[str] = field(default_factory=list)
    logcat_event: threading.Event = field(default_factory=threading.Event)
    logcat_readers: list[int] = field(default_factory=list)  # their client ports
    logcat_sent: int = 0  # lines written to the readers' sockets so far
    on_command: Callable[[FakeDevice, list[str]], None] | None = None
    state: str = "device"
    statuses: dict[str, int] = field(default_factory=lambda: {"su": 127})  # not rooted

    def run(self, line: str) -> str:
        """One shell command line (possibly `a; b`); its output."""
        out = []
        status = 0
        for part in re.split(r"; echo (?=__labd_)", line):  # the driver's sentinel follows
            if part.startswith("__labd_"):
                out.append(part.replace("$?", str(status)) + "\n")
                continue
            argv = shlex.split(part)
            if not argv:
                continue
            self.received.append(argv)
            status = self.statuses.get(argv[0], 0)
            if self.on_command is not None:
                self.on_command(self, argv)
            answered = self.answer(argv)
            if answered is not None:
                text, status = answered
                out.append(text)
                continue
            if argv[0] == "getprop" and len(argv) == 2:
                out.append(self.props.get(argv[1], "") + "\n")
                continue
            for n in (3, 2, 1):
                key = " ".join(argv[:n])
                if key in self.outputs:
                    out.append(self.outputs[key])
                    break
        return "".join(out)

    def emit(self, *lines: str) -> None:
        self.logcat.extend(lines)
        self.logcat_event.set()

    def answer(self, argv: list[str]) -> tuple[str, int] | None:
        """A device that computes its answers (output, exit status); None: `outputs`."""
        return None

    def send(self, conn: socket.socket, answer: str) -> None:
        """How a persistent shell's answer reaches the socket (a device may send it in pieces)."""
        conn.sendall(answer.encode())

    def stream(self, command: str, conn: socket.socket) -> bool:
        """A command whose output streams or is binary (screenrecord, screencap): written to
        `conn` here; False when this device has no such command."""
        return False

    def abstract_socket(self, name: str) -> tuple[str, int] | None:
        """Where a device-side socket (`localabstract:NAME`, `tcp:N`) really listens, for
        `adb forward`; None when nothing listens on the device."""
        return None

    def reversed_port(self, device_port: int) -> int | None:
        """The host port `adb reverse` maps this device port to, if any."""
        for spec in reversed(self.reverses):
            remote, _, local = spec.partition(";")
            if remote == f"tcp:{device_port}" and local.startswith("tcp:"):
                return int(local.removeprefix("tcp:"))
        return None


class AdbStandIn:
    def __init__(self) -> None:
        self.devices: dict[str, FakeDevice] = {}
        self.trackers: list[socket.socket] = []
        self.forwards: dict[str, tuple[str, str, socket.socket]] = {}  # local -> serial, remote
        # A broken server: every request answered with these bytes instead (b"": never
        # answered, the connection held open, as a hung adb server does).
        self.garbled: bytes | None = None
        self.hangs_up = False  # after the garbled bytes: close, not hold the connection open
        stand_in = self

        class Session(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                stand_in.serve(self.request)

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Session)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def add(self, device: FakeDevice) -> FakeDevice:
        self.devices[device.serial] = device
        self._notify()
        return device

    def remove(self, serial: str) -> None:
        self.devices.pop(serial, None)
        self._notify()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        for _, _, listener in self.forwards.values():
            listener.close()

    def _listing(self) -> bytes:
        return "".join(f"{d.serial}\t{d.state}\n" for d in self.devices.values()).encode()

    def _notify(self) -> None:
        for tracker in list(self.trackers):
            try:
                tracker.sendall(_block(self._listing()))
            except OSError:
                self.trackers.remove(tracker)

    # The protocol -----------------------------------------------------------------------------

    def serve(self, conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as adb itself does
        device: FakeDevice | None = None
        while True:
            request = _request(conn)
            if request is None:
                return
            if self.garbled is not None:
                conn.sendall(self.garbled)
                if not self.hangs_up:
                    _wait_closed(conn)
                return
            if request == "host:version":
                conn.sendall(b"OKAY" + _block(b"0029"))  # 41
                return
            if request in ("host:devices", "host:devices-l"):
                conn.sendall(b"OKAY" + _block(self._listing()))
                return
            if request == "host:track-devices":
                conn.sendall(b"OKAY" + _block(self._listing()))
                self.trackers.append(conn)
                _wait_closed(conn)
                return
            if request.startswith(("host:tport:serial:", "host:transport:")):
                serial = request.removeprefix("host:tport:serial:").removeprefix("host:transport:")
                device = self.devices.get(serial)
                if device is None:
                    _fail(conn, f"device '{serial}' not found")
                    return
                conn.sendall(b"OKAY" + (b"\x01" + b"\x00" * 7 if "tport" in request else b""))
                continue
            if request.startswith("host-serial:"):
                serial, _, command = request.removeprefix("host-serial:").partition(":")
                if ":" in command and command.split(":", 1)[0].isdigit():  # host:port serials
                    port, _, command = command.partition(":")
                    serial = f"{serial}:{port}"
                found = self.devices.get(serial)
                if found is None:
                    _fail(conn, f"device '{serial}' not found")
                elif command == "get-state":
                    conn.sendall(b"OKAY" + _block(found.state.encode()))
                elif command.startswith("forward:") or command == "list-forward":
                    self._forward(conn, found, command)
                elif command.startswith("killforward:"):
                    self._kill_forward(conn, command.removeprefix("killforward:"))
                else:
                    _fail(conn, f"unsupported {command}")
                return
            if device is None:
                _fail(conn, f"no transport for {request!r}")
                return
            self._local(conn, device, request)
            return

    # adb forward: a listener on the host, each connection bridged to the device's socket.

    def _forward(self, conn: socket.socket, device: FakeDevice, command: str) -> None:
        if command == "list-forward":
            rows = "".join(f"{s} {local} {r}\n" for local, (s, r, _) in self.forwards.items())
            conn.sendall(b"OKAY" + _block(rows.encode()))
            return
        local, _, remote = command.removeprefix("forward:").removeprefix("norebind:").partition(";")
        if not local.startswith("tcp:") or not remote:
            _fail(conn, f"cannot forward {command!r}")
            return
        self._kill(local)
        listener = socket.create_server(("127.0.0.1", int(local.removeprefix("tcp:"))))
        self.forwards[local] = (device.serial, remote, listener)
        threading.Thread(target=self._accept, args=(listener, device, remote), daemon=True).start()
        conn.sendall(b"OKAYOKAY")

    def _kill_forward(self, conn: socket.socket, local: str) -> None:
        if local not in self.forwards:
            _fail(conn, f"listener '{local}' not found")
            return
        self._kill(local)
        conn.sendall(b"OKAYOKAY")

    def _kill(self, local: str) -> None:
        if local in self.forwards:
            self.forwards.pop(local)[2].close()

    @staticmethod
    def _accept(listener: socket.socket, device: FakeDevice, remote: str) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            target = device.abstract_socket(remote.split(":", 1)[1])
            if target is None:  # as adb does: accepted, then closed (nothing listens there)
                client.close()
                continue
            try:
                upstream = socket.create_connection(target, 5)
            except OSError:
                client.close()
                continue
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pipe, args=(a, b), daemon=True).start()

    def _local(self, conn: socket.socket, device: FakeDevice, request: str) -> None:
        if request.startswith("reverse:"):
            self._reverse(conn, device, request.removeprefix("reverse:"))
            return
        service, _, command = request.partition(":")
        if service not in ("shell", "exec") or self.devices.get(device.serial) is not device:
            _fail(conn, f"closed: {request!r}")
            return
        conn.sendall(b"OKAY")
        if device.stream(command, conn):
            pass
        elif command.startswith("logcat"):
            self._logcat(conn, device)
        elif command in ("", "sh"):  # a persistent shell: commands on stdin
            self._shell(conn, device)
        else:
            conn.sendall(device.run(command).encode())
        conn.close()

    @staticmethod
    def _reverse(conn: socket.socket, device: FakeDevice, command: str) -> None:
        if command.startswith("forward:"):
            spec = command.removeprefix("forward:").removeprefix("norebind:")
            device.reverses.append(spec)
            conn.sendall(b"OKAYOKAY")
        elif command == "killforward-all":
            device.reverses.clear()
            conn.sendall(b"OKAYOKAY")
        elif command.startswith("killforward:"):
            remote = command.removeprefix("killforward:")
            device.reverses[:] = [r for r in device.reverses if not r.startswith(remote + ";")]
            conn.sendall(b"OKAYOKAY")
        elif command == "list-forward":
            rows = "".join(f"{device.serial} {r.replace(';', ' ')}\n" for r in device.reverses)
            conn.sendall(b"OKAYOKAY" + _block(rows.encode()))
        else:
            _fail(conn, f"unsupported reverse:{command}")

    def _shell(self, conn: socket.socket, device: FakeDevice) -> None:
        pending = b""
        while True:
            try:
                data = conn.recv(65536)
            except OSError:
                return
            if not data:
                return
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                if device.serial not in self.devices:  # unplugged mid-command
                    conn.close()
                    return
                device.send(conn, device.run(line.decode()))

    def _logcat(self, conn: socket.socket, device: FakeDevice) -> None:
        device.logcat_readers.append(conn.getpeername()[1])
        sent = 0
        while device.serial in self.devices:
            if sent < len(device.logcat):
                lines = device.logcat[sent:]
                sent += len(lines)
                try:
                    conn.sendall(("\n".join(lines) + "\n").encode())
                except OSError:
                    return
                device.logcat_sent = sent
            else:
                device.logcat_event.wait(0.05)
                device.logcat_event.clear()


def unread_bytes(client_port: int) -> int | None:
    """Bytes waiting in the receive queue of a loopback client's socket (Linux
    /proc/net/tcp): 0 once the client has read all that was sent; None when it has gone."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local_port = int(fields[1].rsplit(":", 1)[1], 16)
        if local_port == client_port:
            return int(fields[4].split(":")[1], 16)
    return None


def _block(data: bytes) -> bytes:
    return f"{len(data):04x}".encode() + data


def _fail(conn: socket.socket, message: str) -> None:
    conn.sendall(b"FAIL" + _block(message.encode()))


def _request(conn: socket.socket) -> str | None:
    header = _exactly(conn, 4)
    if header is None:
        return None
    body = _exactly(conn, int(header, 16))
    return None if body is None else body.decode()


def _exactly(conn: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        try:
            chunk = conn.recv(n - len(data))
        except OSError:
            return None
        if not chunk:
            return None
        data += chunk
    return data


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)


def _wait_closed(conn: socket.socket) -> None:
    try:
        while conn.recv(1024):
            pass
    except OSError:
        pass
