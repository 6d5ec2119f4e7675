"""The Android driver: phones and emulators over adb (adbutils), USB or TCP."""

from __future__ import annotations

import contextlib
import socket
from typing import Any, ClassVar

import adbutils
import structlog
from pydantic import BaseModel, ConfigDict, Field

from labd.sdk import Device, Driver, MarkerStream, TouchInput
from labd_android.adb import ADB_ERRORS, Client, Threads, failure
from labd_android.gestures import Gestures
from labd_android.health import CPUFREQ, Health, cpufreq, parse
from labd_android.input import AndroidInput
from labd_android.launch import AppLaunch
from labd_android.logcat import Logcat
from labd_android.names import serial_problem, shown
from labd_android.pageload import PhonePageLoad
from labd_android.screen import AndroidScreen
from labd_android.shell import PersistentShell, run

# What to do about a phone adb lists in a state other than "device".
NOT_READY_HINTS = {
    "unauthorized": "accept this computer's key on the phone (the USB debugging prompt)",
    "offline": "replug it, or restart its adb daemon (toggle USB debugging)",
    "authorizing": "wait a moment, or accept the USB debugging prompt on the phone",
}

log = structlog.get_logger("labd.android")


class AndroidOptions(BaseModel):
    """Options of the Android driver (`[drivers.android]`)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(True, description="Look for Android devices.")
    adb_host: str = Field("127.0.0.1", description="The adb server.")
    adb_port: int = Field(5037, ge=1, le=65535, description="The adb server's port.")
    connect: list[str] = Field(
        default_factory=list, description='TCP devices to attach, e.g. ["10.0.0.5:5555"].'
    )
    start_adb_server: bool = Field(
        False, description="Start adb's server (adbutils' bundled adb) when none answers."
    )
    tags: list[str] = Field(default_factory=list, description="Tags for device selectors.")
    min_battery: int = Field(
        20, ge=0, le=100, description="Health: below this and not charging is unhealthy."
    )
    max_thermal_status: int = Field(
        1, ge=0, le=6, description="Health: above this (1 = light) is throttling."
    )
    min_free_storage_mb: float = Field(500, ge=0, description="Health: free space needed on /data.")


class AndroidDriver(Driver[AndroidOptions]):
    name = "android"
    platform = "android"
    version = "1"
    scenario_types = (AppLaunch, Gestures, PhonePageLoad)
    provides: ClassVar = {
        TouchInput: "input",
        MarkerStream: "logcat",
        PersistentShell: "shell",
        AndroidScreen: "screen",
    }

    def __init__(self, options: AndroidOptions, host: str) -> None:
        super().__init__(options, host)
        self.client = Client(host=options.adb_host, port=options.adb_port)
        self.server = f"adb server {options.adb_host}:{options.adb_port}"
        self.threads = Threads()
        self.known: dict[str, Device] = {}
        self.refused: set[str] = set()  # listed serials labd cannot use: warned about once
        self.not_ready: set[tuple[str, str]] = set()  # (serial, adb state) already said
        self.unread: dict[str, tuple[str, ...]] = {}  # serial: health figures not read, said
        self.warned = False
        self.absent_why = ""  # why every phone is gone: the adb server is

    def adb_device(self, serial: str) -> adbutils.AdbDevice:
        return self.client.device(serial=serial)

    async def discover(self) -> list[Device]:
        """Devices adb sees now (called periodically: plugging and unplugging show up)."""
        if not self.options.enabled:
            return []
        return await self.threads.call("discover", self._discover)

    def _server_answers(self) -> bool:
        try:
            socket.create_connection((self.options.adb_host, self.options.adb_port), 1).close()
        except OSError:
            return False
        return True

    def _discover(self) -> list[Device]:
        # adbutils would start an adb server as a side effect; a daemon does not, unless told.
        if not self.options.start_adb_server and not self._server_answers():
            if not self.warned:
                address = f"{self.options.adb_host}:{self.options.adb_port}"
                hint = "adb start-server, or [drivers.android] start_adb_server = true"
                # A lab with no phones yet has none (info); one that had phones lost them all.
                said = log.warning if self.known else log.info
                said("no adb server", address=address, hint=hint)
                self.warned = True
            self.absent_why = f"no adb server at {self.options.adb_host}:{self.options.adb_port}"
            return []
        self.warned = False
        self.absent_why = ""
        for address in self.options.connect:
            with contextlib.suppress(*ADB_ERRORS):  # the next round tries again
                self.client.connect(address, timeout=3)
        try:
            listed = self.client.listed()
        except ADB_ERRORS as e:
            raise failure(self.server, e) from e
        serials = self._ready(listed)
        # A phone that left the list is read afresh when it comes back: rebooted into an
        # update, it has a new Android version (every result's fingerprint names it).
        self.known = {serial: d for serial, d in self.known.items() if serial in serials}
        devices = []
        for serial in self._usable(serials):
            if serial not in self.known:
                props = self._props(serial)
                self.known[serial] = Device(
                    id=serial,
                    driver=self.name,
                    platform=self.platform,
                    model=props.get("ro.product.model", ""),
                    os_version=props.get("ro.build.version.release", ""),
                    tags=list(self.options.tags),
                    host=self.host,
                    capabilities={
                        "sdk": props.get("ro.build.version.sdk", ""),
                        "abi": props.get("ro.product.cpu.abi", ""),
                        "transport": "tcp" if ":" in serial else "usb",
                    },
                )
            devices.append(self.known[serial])
        return devices

    def why_absent(self, device_id: str) -> str | None:
        return self.waiting().get(device_id) or self.absent_why or None

    def waiting(self) -> dict[str, str]:
        return {
            serial: f"adb state {state}: {NOT_READY_HINTS.get(state, 'see `adb devices`')}"
            for serial, state in sorted(self.not_ready)
            if serial_problem(serial) is None
        }

    def _ready(self, listed: list[tuple[str, str]]) -> list[str]:
        """The serials adb can use now (state "device"); one in another state (a phone that
        has not accepted this computer's key) is said once while it stays so, or it would
        be missing from the lab without a word."""
        waiting = {(serial, state) for serial, state in listed if state != "device"}
        for serial, state in sorted(waiting - self.not_ready):
            log.warning(
                "device not ready",
                server=self.server,
                device=shown(serial),
                adb_state=state,
                hint=NOT_READY_HINTS.get(state, "see `adb devices`"),
            )
        self.not_ready = waiting
        return [serial for serial, state in listed if state == "device"]

    def _usable(self, serials: list[str]) -> list[str]:
        """The serials labd can name devices by; one it cannot is skipped (the others are
        still discovered), with a warning while it stays listed."""
        self.refused &= set(serials)
        usable = []
        for serial in serials:
            if (problem := serial_problem(serial)) is None:
                usable.append(serial)
            elif serial not in self.refused:
                log.warning("device skipped", server=self.server, problem=problem)
                self.refused.add(serial)
        return usable

    def _props(self, serial: str) -> dict[str, str]:
        device = self.adb_device(serial)
        names = (
            "ro.product.model",
            "ro.build.version.release",
            "ro.build.version.sdk",
            "ro.product.cpu.abi",
        )
        return {name: run(device, ["getprop", name]).strip() for name in names}

    async def health(self, device: Device) -> str | None:
        return await self.threads.call(("health", device.id), self._health, device.id)

    def _health(self, serial: str) -> str | None:
        adb = self.adb_device(serial)
        try:
            state = adb.get_state()
        except ADB_ERRORS as e:
            return str(failure(f"{self.server}: device {serial}", e))
        if state != "device":
            return f"adb state {state!r}"
        health = self.state(serial)
        self._say_unread(serial, health)
        return health.problem(
            self.options.min_battery,
            self.options.max_thermal_status,
            self.options.min_free_storage_mb,
        )

    def _say_unread(self, serial: str, health: Health) -> None:
        """A health figure the phone did not give is not checked: said once while it stays
        so (a phone is not quarantined for it, nor silently counted healthy)."""
        missing = health.unread()
        if missing and self.unread.get(serial) != missing:
            log.warning(
                "health not fully checked",
                device=shown(serial),
                unread=", ".join(missing),
                hint="`dumpsys battery` and `dumpsys thermalservice` gave no figure for them",
            )
        self.unread[serial] = missing

    def state(self, serial: str) -> Health:
        adb = self.adb_device(serial)
        texts = [run(adb, argv) for argv in (["dumpsys", "battery"], ["dumpsys", "thermalservice"],
                                              ["df", "/data"], ["dumpsys", "power"])]  # fmt: skip
        return parse(*texts)

    async def conditions(self, device: Device) -> dict[str, Any]:
        return await self.threads.call(("conditions", device.id), self._conditions, device.id)

    def _conditions(self, serial: str) -> dict[str, Any]:
        """Thermal status, battery temperature, CPU frequencies and governors."""
        adb = self.adb_device(serial)
        health = parse(run(adb, ["dumpsys", "battery"]), run(adb, ["dumpsys", "thermalservice"]),
                       "", "")  # fmt: skip
        return {
            "thermal_status": health.thermal_status,
            "battery_temp_c": health.battery_temp_c,
            **cpufreq(run(adb, ["sh", "-c", CPUFREQ])),
        }

    def input(self, device: Device) -> AndroidInput:
        """Touch and keys through a persistent shell (blocking: use from a thread)."""
        return AndroidInput(self.shell(device))

    def shell(self, device: Device) -> PersistentShell:
        """A shell on the device that stays open (it connects on its first command)."""
        return PersistentShell(self.adb_device(device.id))

    def screen(self, device: Device) -> AndroidScreen:
        """The phone's screen: size, screenshots, browser, ports, screenrecord."""
        address = (self.options.adb_host, self.options.adb_port)
        return AndroidScreen(self.adb_device(device.id), self.shell(device), address)

    def logcat(self, device: Device) -> Logcat:
        """The device's log as it comes (opened by the scenario)."""
        return Logcat(self.adb_device(device.id))

    async def expose_port(self, device: Device, host: str, port: int) -> str:
        """`adb reverse`: the device reaches the host's server on its own loopback."""
        adb = self.adb_device(device.id)
        spec = f"tcp:{port}"
        try:
            await self.threads.call(("reverse", device.id, port), adb.reverse, spec, spec)
        except ADB_ERRORS as e:
            raise failure(f"device {device.id}: adb reverse {spec}", e) from e
        return f"127.0.0.1:{port}"

    async def close(self) -> None:
        self.threads.close()
