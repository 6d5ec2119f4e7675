"""The device pool of this host: discovery with hot-plug, health checks, quarantine, power.

The pool is the one owner of its devices' state. It persists every change to the store (so
`labd devices` and other hosts see it) and publishes it as a DeviceChanged event.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping

import structlog
from pydantic import ValidationError

from labd.config import PoolSettings
from labd.events import DeviceChanged, DevicePowerCycled, EventBus, HealthCheckFailed
from labd.model import AdminState, Device, DeviceState, running_reason
from labd.sdk import Driver, PowerControl
from labd.store import DeviceTaken, Store, running_hosts
from labd.tasks import Failures, TaskSet
from labd.visible import brief, quoted

log = structlog.get_logger("labd.pool")

MAX_SAID = 10_000  # invalid device records remembered as said
VANISHED = "vanished"  # with what its driver knows of why, where it does
UNSEEN = (VANISHED, "not discovered yet")  # offline until its driver finds it
NOT_READY = "not ready: "  # seen by its driver, not offered yet: with what to do
# An idle device whose driver cannot list devices now (an adb server hung): offline, not
# unhealthy. Its health checks would fail through the same fault, and blame each device.
UNLISTED = "its driver's discovery fails: "
# What a driver says a device is, taken afresh at every discovery: a phone updated to a new
# Android kept its old os_version (and every result its old fingerprint) until it was removed.
DESCRIBED = ("platform", "model", "os_version", "tags", "capabilities")


class Pool:
    """Tracks this host's devices; the scheduler asks it which are free."""

    name = "pool"

    def __init__(
        self,
        drivers: Mapping[str, Driver],
        power: Mapping[str, PowerControl],
        store: Store,
        bus: EventBus,
        settings: PoolSettings,
        host: str,
    ) -> None:
        self.drivers = dict(drivers)
        self.power = dict(power)
        # Plugins refused at registration or that failed to start (see plugins.Plugins): their
        # devices say why.
        refused = {
            name: f"its driver {name} was refused: {why}"
            for name, why in getattr(drivers, "refused", {}).items()
            if name not in drivers
        }
        self.broken_drivers: dict[str, str] = refused | dict(getattr(drivers, "failed", {}))
        self.broken_power: dict[str, str] = dict(getattr(power, "failed", {}))
        self.store = store
        self.bus = bus
        self.settings = settings
        self.host = host
        self.devices: dict[str, Device] = {}
        self.busy: dict[str, str] = {}  # device id -> job id
        self._found: set[str] = set()  # the devices drivers listed at the last discovery
        self._health_failures: dict[str, int] = {}
        self._unsaved: set[str] = set()  # devices whose last change the store did not take
        self._refused_ids: set[str] = set()  # ids another running host offers
        self._discovery_failing: dict[str, str] = {}  # driver -> why its discovery fails
        self._said: set[tuple[str, str, str]] = set()  # devices a driver returned wrong
        self._power_unmatched: set[str] = set()  # power controls said to match no device
        self._save_failures = Failures("saving a device's state (kept meanwhile)", log)
        self._admin_failures = Failures("reading administrators' changes (tried again)", log)
        # Changes made and saves under way, per device: what the store says of a device is
        # not taken for an administrator's change while this pool is writing it.
        self._edits: dict[str, int] = {}
        self._saving: dict[str, int] = {}
        self._tasks = TaskSet("pool")

    async def start(self) -> None:
        # Devices of this host from an earlier run are offline until discovered again; a
        # quarantined one stays so, with its reason, until an administrator enables it (a
        # restart or an upgrade offered a phone that failed its health checks jobs again).
        for device in await self.store.list_devices(host=self.host):
            if device.state is DeviceState.QUARANTINED:
                self.devices[device.id] = device
                continue
            self.devices[device.id] = device.model_copy(
                update={"state": DeviceState.OFFLINE, "reason": "not discovered yet"}
            )
            if broken := self.broken_drivers.get(device.driver):
                await self._update(device.id, state=DeviceState.OFFLINE, reason=broken)
        await self.discover()
        every = self._every
        self._tasks.supervise(
            "discovery", lambda: every(self.settings.discovery_interval_s, self.discover), self.bus
        )
        self._tasks.supervise(
            "health", lambda: every(self.settings.health_interval_s, self.check_health), self.bus
        )

    async def stop(self, grace: float) -> None:
        await self._tasks.cancel_all()
        for device_id, device in list(self.devices.items()):
            if device.state is not DeviceState.QUARANTINED:  # kept: see start()
                await self._update(device_id, state=DeviceState.OFFLINE, reason="labd stopped")
        for driver in self.drivers.values():
            await _quietly(driver.close(), f"closing driver {driver.name}")
        for control in self.power.values():
            await _quietly(control.close(), "closing power control")

    async def _every(self, interval: float, action: Callable[[], Awaitable[None]]) -> None:
        failures = Failures(f"pool pass {action.__name__}", log)
        while True:
            await asyncio.sleep(interval)
            try:
                await action()
                failures.succeeded()
            except Exception as e:
                # One bad pass (a plugin bug, a database hiccup) must not end the loop that
                # looks after every device of the host.
                failures.failed(e)

    # Discovery and health -------------------------------------------------------------------

    async def discover(self) -> None:
        """Ask every driver for its devices: new ones join, vanished ones go offline; take
        up what administrators changed through another host."""
        await self._save_unsaved()
        await self._adopt_admin_changes()
        seen: set[str] = set()
        found_now: set[str] = set()
        limit = self.settings.health_timeout_s
        for driver in self.drivers.values():
            try:
                async with asyncio.timeout(limit):
                    found = self._checked(driver, await driver.discover(), seen)
            except Exception as e:
                why = repr(e) if not isinstance(e, ValidationError) else _first_line(e)
                if isinstance(e, TimeoutError):
                    why = f"discover() took over pool.health_timeout_s ({limit:g} s)"
                if self._discovery_failing.get(driver.name) != why:  # said once, not every pass
                    log.warning("discovery failed", driver=driver.name, error=why)
                    self._discovery_failing[driver.name] = why
                # No unplug either: its devices stay, the idle ones offline until it answers.
                for device in [d for d in self.devices.values() if d.driver == driver.name]:
                    seen.add(device.id)
                    if device.state is DeviceState.AVAILABLE and device.id not in self.busy:
                        await self._update(
                            device.id, state=DeviceState.OFFLINE, reason=UNLISTED + why
                        )
                continue
            if self._discovery_failing.pop(driver.name, None) is not None:
                log.info("discovery works again", driver=driver.name)
            for device in found:
                seen.add(device.id)
                found_now.add(device.id)
                await self._discovered(device)
            for device_id, why in self._waiting(driver, seen).items():
                seen.add(device_id)
                await self._not_ready(driver, device_id, why)
        self._found = found_now
        for device_id, device in list(self.devices.items()):
            # A quarantine outlasts an unplugging (a phone that rebooted came back available).
            if device_id in seen or device.state is DeviceState.QUARANTINED:
                continue
            if device.state is not DeviceState.OFFLINE or device.reason.startswith(NOT_READY):
                known = self._why_absent(device)
                reason = f"{VANISHED}: {known}" if known else VANISHED
                await self._update(device_id, state=DeviceState.OFFLINE, reason=reason)
        self._say_unmatched_power()

    def _waiting(self, driver: Driver, seen: set[str]) -> dict[str, str]:
        """The devices `driver` sees and cannot offer yet (`Driver.waiting`), not offered by
        another driver; a plugin's hook failing is no reason to stop discovery."""
        try:
            waiting = dict(driver.waiting())
        except Exception as e:
            log.debug("waiting() failed", driver=driver.name, error=repr(e))
            return {}
        kept = {}
        for device_id, why in waiting.items():
            if not isinstance(device_id, str):
                problem = f"waiting() gave the id {quoted(device_id)}, not a string"
                self._left_out(driver.name, repr(device_id)[:140], problem)
            elif not isinstance(why, str) or not why:
                problem = f"waiting() gave {type(why).__name__} {quoted(why)}, not why, in words"
                self._left_out(driver.name, repr(device_id)[:140], problem)
            elif device_id not in seen:
                kept[device_id] = brief(why, 300)
        return kept

    async def _not_ready(self, driver: Driver, device_id: str, why: str) -> None:
        """A device its driver sees and cannot offer yet (a phone that has not accepted this
        computer's key): listed offline with what to do, where it was missing without a word
        until it was ready. Its driver describes it once it is."""
        reason = NOT_READY + why
        if (known := self.devices.get(device_id)) is not None:
            # Offline while it is so, whatever it was (left available, a phone that dropped to
            # adb "offline" failed its health checks into a quarantine); a quarantine stays.
            if known.state is not DeviceState.QUARANTINED:
                await self._update(device_id, state=DeviceState.OFFLINE, reason=reason)
            return
        try:
            placeholder = Device.checked(
                {"id": device_id, "driver": driver.name, "platform": driver.platform,
                 "state": "offline", "reason": reason}
            )  # fmt: skip
        except ValidationError as e:
            self._left_out(driver.name, repr(device_id)[:140], _first_line(e))
            return
        if (device := await self._recorded(placeholder)) is None:
            return
        self.devices[device_id] = device
        log.info("device appeared, not ready", device=device_id, reason=reason)
        self.bus.publish(device_changed(device))

    def _why_absent(self, device: Device) -> str | None:
        """What its driver knows of why `device` is gone: a plugin's hook failing or giving
        no text is no reason (it is not let stop discovery)."""
        owner = self.drivers.get(device.driver)
        try:
            known = owner.why_absent(device.id) if owner is not None else None
        except Exception as e:
            log.debug("why_absent failed", driver=device.driver, error=repr(e))
            return None
        return brief(known, 300) if isinstance(known, str) and known else None

    def _say_unmatched_power(self) -> None:
        """A power control whose device no driver has found, said once: a typo in its id
        leaves the real device with none (or its device is not plugged in yet)."""
        for device_id in sorted({*self.power, *self.broken_power} - {*self.devices}):
            if device_id not in self._power_unmatched:
                self._power_unmatched.add(device_id)
                log.warning(
                    "power control for a device no driver has found",
                    device=device_id,
                    hint="[pool.power.<id>] takes a device id as `labd devices list` shows it",
                )

    def _checked(self, driver: Driver, found: object, taken: set[str]) -> list[Device]:
        """The devices a driver's discover() returned that the lab may keep. Each is checked
        again whole (a plugin can build one and then set an id the rules refuse, which would
        break every listing and topic): one that is not a valid device of this driver, or
        whose id another device already has, is left out, said once. Anything but a list is
        a failed discovery (ValueError)."""
        if not isinstance(found, list | tuple):
            raise ValueError(f"discover() returned {type(found).__name__}, not a list of Device")
        kept: dict[str, Device] = {}
        for item in found:
            device, problem = _device_of(item, driver.name)
            if device is not None and (device.id in taken or device.id in kept):
                problem = f"another device has the id {device.id!r}"
            if device is None or problem:
                self._left_out(driver.name, repr(getattr(item, "id", item))[:140], problem)
                continue
            kept[device.id] = device
        return list(kept.values())

    def _left_out(self, driver: str, device: str, problem: str) -> None:
        """Said once per device and problem (discovery runs every few seconds)."""
        if (driver, device, problem) not in self._said:
            if len(self._said) >= MAX_SAID:  # a driver inventing new bad ids every round
                self._said.clear()
            self._said.add((driver, device, problem))
            log.error("device left out: its driver returned an invalid record", driver=driver,
                      device=device, problem=problem)  # fmt: skip

    async def _discovered(self, found: Device) -> None:
        known = self.devices.get(found.id)
        if known is None:
            if (device := await self._recorded(found)) is None:
                return
            # Placeholder state, so the update below is a change that is published.
            self.devices[found.id] = device.model_copy(update={"state": DeviceState.OFFLINE})
            log.info("device appeared", device=found.id, platform=found.platform)
            await self._update(found.id, **self._settled(device))
            return
        described = {key: getattr(found, key) for key in DESCRIBED}
        if changed := {
            k: [getattr(known, k), v]
            for k, v in described.items()
            if _comparable(k, getattr(known, k)) != _comparable(k, v)
        }:
            log.info("device description changed", device=found.id, changes=changed)
            known = await self._update(found.id, **described)
        if known.state is DeviceState.OFFLINE and _unseen(known.reason):
            await self._update(found.id, **self._settled(known))

    async def _recorded(self, new: Device) -> Device | None:
        """A device new to this host, recorded as this host's; None when another running host
        offers the same id (said once)."""
        try:
            if owner := await self._offered_elsewhere(new.id):
                raise DeviceTaken(f"host {owner!r}, which runs labd, offers it")
            return await self.store.upsert_device(new.model_copy(update={"host": self.host}))
        except DeviceTaken as e:
            self._not_taken(new, str(e))
            return None

    async def _offered_elsewhere(self, device_id: str) -> str:
        """The other running host whose device this id is, or "" (none, or its host is gone:
        a phone moved to this host is this host's now)."""
        stored = await self.store.get_device(device_id)
        if stored is None or stored.host == self.host:
            return ""
        return stored.host if await running_hosts(self.store, [stored.host]) else ""

    def _not_taken(self, found: Device, why: str) -> None:
        """Two hosts offer one device id (a cloned machine's `host-<hostname>`): jobs for one
        would run on the other. Said once per id; the device stays the other host's."""
        if found.id not in self._refused_ids:
            self._refused_ids.add(found.id)
            log.error(
                "device not taken: another host offers the same id",
                device=found.id,
                reason=why,
                hint="give one of them another id (this machine's own device: [drivers.host] id)",
            )

    async def check_health(self) -> None:
        """Run each idle device's health check; power-cycle, then quarantine, the failing."""
        for device_id, device in list(self.devices.items()):
            if device_id in self.busy or device.state is DeviceState.QUARANTINED:
                continue
            # Not seen by its driver (gone, or not since this start: its driver's discovery
            # failed): a health check alone does not bring it back.
            if device.state is DeviceState.OFFLINE and _unseen(device.reason):
                continue
            if device.driver in self.broken_drivers:
                continue
            reason = await self._health_of(device)
            if reason is None:
                self._health_failures.pop(device_id, None)
                if device.state is DeviceState.OFFLINE:
                    await self._update(device_id, state=DeviceState.AVAILABLE, reason="")
                continue
            await self._unhealthy(device, reason)

    async def _health_of(self, device: Device) -> str | None:
        driver = self.drivers.get(device.driver)
        if driver is None:
            return f"driver {device.driver!r} is not loaded on this host"
        try:
            async with asyncio.timeout(self.settings.health_timeout_s):
                return await driver.health(device)
        except TimeoutError:
            return f"health check took longer than {self.settings.health_timeout_s:g} s"
        except Exception as e:
            return f"health check failed: {e!r}"

    async def _unhealthy(self, device: Device, reason: str) -> None:
        failures = self._health_failures.get(device.id, 0) + 1
        self._health_failures[device.id] = failures
        log.warning("device unhealthy", device=device.id, reason=reason, failures=failures)
        self.bus.publish(
            HealthCheckFailed(
                device_id=device.id, platform=device.platform, reason=reason, failures=failures
            )
        )
        after = self.settings.power_cycle_after
        control = self.power.get(device.id)
        if failures == after and control is not None:
            # Bounded: a relay that stopped answering held the health pass of every device
            # of the host (a serial board waits out each missing echo, ten time-outs).
            limit = self.settings.power_off_s + 2 * self.settings.health_timeout_s
            try:
                async with asyncio.timeout(limit):
                    await self.power_cycle(device.id, reason)
            except Exception as e:
                # The relay's own fault: this device is broken, the others go on.
                error = f"{type(e).__name__}: {e}"
                if isinstance(e, TimeoutError):
                    error = f"took over {limit:g} s, power_off_s and two health_timeout_s"
                log.error("power cycle failed", device=device.id, error=error)
                await self._update(
                    device.id,
                    state=DeviceState.QUARANTINED,
                    reason=f"power cycle failed ({error}; the device may be left switched "
                    f"off: see to it, then `labd devices enable`) after: {reason}",
                )
                return
            await self._update(device.id, state=DeviceState.OFFLINE, reason=reason)
        elif failures > after and (control is not None or failures >= 2 * after):
            why = "power cycle did not help" if control else "no power control configured"
            await self._update(
                device.id,
                state=DeviceState.QUARANTINED,
                reason=f"health check failed {failures} times ({reason}); {why}",
            )
        else:
            await self._update(device.id, state=DeviceState.OFFLINE, reason=reason)

    async def power_cycle(self, device_id: str, reason: str) -> None:
        control = self.power[device_id]
        log.warning("power-cycling device", device=device_id, reason=reason)
        await control.cycle(self.settings.power_off_s)
        self.bus.publish(DevicePowerCycled(device_id=device_id, reason=reason))

    async def _save(self, device: Device) -> None:
        """Persist a change; while the database is away the pool's own view stands and the
        discovery pass saves it later (a lost write must not leave a device `busy` there)."""
        self._saving[device.id] = self._saving.get(device.id, 0) + 1
        try:
            await self.store.upsert_device(device)
        except Exception as e:
            self._unsaved.add(device.id)
            self._save_failures.failed(e, device=device.id)  # not a line every 10 s
        else:
            self._unsaved.discard(device.id)
            if not self._unsaved:
                self._save_failures.succeeded()
        finally:
            self._saving[device.id] -= 1

    async def _adopt_admin_changes(self) -> None:
        """`labd devices drain|maintenance|enable` run against another host writes only the
        store: the stored admin state is read here each discovery pass and applied, and a
        quarantine the store says was lifted is lifted."""
        edits, busy_saving = dict(self._edits), {d for d, n in self._saving.items() if n}
        try:
            stored = await self.store.list_devices(host=self.host)
        except Exception as e:  # the database away: the next pass reads again
            self._admin_failures.failed(e)
            return
        self._admin_failures.succeeded()
        for there in stored:
            mine = self.devices.get(there.id)
            if (
                mine is None
                or there.id in busy_saving
                or there.id in self._unsaved
                or self._edits.get(there.id) != edits.get(there.id)  # changed while reading
            ):
                continue
            lifted = (
                mine.state is DeviceState.QUARANTINED
                and there.state is not DeviceState.QUARANTINED
                and there.admin is AdminState.ENABLED
            )
            if there.admin is not mine.admin or lifted:
                log.info(
                    "administrator's change made through another host taken up",
                    device=there.id,
                    admin=there.admin.value,
                    quarantine_lifted=lifted,
                )
                await self._apply_admin(there.id, there.admin)

    async def _save_unsaved(self) -> None:
        for device_id in sorted(self._unsaved):
            if device := self.devices.get(device_id):
                await self._save(device)

    # Leasing ----------------------------------------------------------------------------------

    def available(self) -> list[Device]:
        """Devices that can take a job now."""
        return [
            d
            for d in self.devices.values()
            if d.state is DeviceState.AVAILABLE
            and d.admin is AdminState.ENABLED
            and d.id not in self.busy
        ]

    def reserve(self, device_id: str, job_id: str) -> None:
        """Take device_id for job_id now, so that it is offered no other job; `acquire` then
        records it busy."""
        self.busy[device_id] = job_id

    async def acquire(self, device_id: str, job_id: str) -> None:
        self.reserve(device_id, job_id)
        await self._update(device_id, state=DeviceState.BUSY, reason=running_reason(job_id))

    async def release(self, device_id: str, infra_failure: str = "") -> None:
        """The job on device_id ended; `infra_failure` says why if the device was at fault."""
        self.busy.pop(device_id, None)
        device = self.devices.get(device_id)
        if device is None:
            return
        failures = device.consecutive_failures + 1 if infra_failure else 0
        if infra_failure and failures >= self.settings.quarantine_after:
            state, reason = (
                DeviceState.QUARANTINED,
                f"{failures} infrastructure failures in a row; last: {infra_failure}",
            )
        elif device.state is DeviceState.BUSY:
            state, reason = self._settled_state(device), self.broken_power.get(device_id, "")
        else:  # it went offline while busy: leave that as it is
            state, reason = device.state, device.reason
        await self._update(device_id, state=state, reason=reason, consecutive_failures=failures)

    async def set_admin(self, device_id: str, admin: AdminState) -> Device | None:
        """drain / maintenance / enable; `enable` also lifts a quarantine. Another host's
        device is changed in the store, and its host takes the change up at its next
        discovery pass (`pool.discovery_interval_s`)."""
        stored = await self.store.set_admin(device_id, admin)
        if stored is None:
            return None
        if device_id not in self.devices:  # another host's device
            if admin is AdminState.ENABLED and stored.state is DeviceState.QUARANTINED:
                # Said in the store for its host, which lifts the quarantine when it reads it.
                lifted = {"state": DeviceState.AVAILABLE, "reason": "", "consecutive_failures": 0}
                await self.store.upsert_device(stored.model_copy(update=lifted))
            return await self.store.get_device(device_id)
        return await self._apply_admin(device_id, admin)

    async def _apply_admin(self, device_id: str, admin: AdminState) -> Device:
        """What an admin state means for this pool's own device."""
        device = self.devices[device_id]
        changes: dict[str, object] = {"admin": admin}
        if admin is AdminState.ENABLED and device.state is DeviceState.QUARANTINED:
            changes |= {"consecutive_failures": 0, "state": DeviceState.AVAILABLE, "reason": ""}
            if device_id not in self._found:  # kept quarantined while gone: it must be found
                changes |= {"state": DeviceState.OFFLINE, "reason": VANISHED}
            self._health_failures.pop(device_id, None)
        if device_id not in self.busy and device.state is not DeviceState.OFFLINE:
            changes.setdefault("state", DeviceState.AVAILABLE)
            if admin is not AdminState.ENABLED:
                changes["state"] = DeviceState.MAINTENANCE
        return await self._update(device_id, **changes)

    def _settled(self, device: Device) -> dict[str, object]:
        """The state (and its reason) of a device nothing is wrong with but what is known."""
        if broken := self.broken_power.get(device.id):
            return {"state": DeviceState.QUARANTINED, "reason": broken}
        if job_id := self.busy.get(device.id):  # back from a blip while its job runs on
            return {"state": DeviceState.BUSY, "reason": running_reason(job_id)}
        return {"state": self._settled_state(device), "reason": ""}

    def _settled_state(self, device: Device) -> DeviceState:
        if device.id in self.broken_power:
            return DeviceState.QUARANTINED
        if device.admin is not AdminState.ENABLED:
            return DeviceState.MAINTENANCE
        if device.consecutive_failures >= self.settings.quarantine_after:
            return DeviceState.QUARANTINED
        return DeviceState.AVAILABLE

    async def _update(self, device_id: str, **changes: object) -> Device:
        old = self.devices[device_id]
        device = old.model_copy(update=changes)
        self.devices[device_id] = device
        self._edits[device_id] = self._edits.get(device_id, 0) + 1
        if (device.state, device.admin, device.reason) == (old.state, old.admin, old.reason) and (
            changes.keys() <= {"state", "reason"}
        ):
            return device
        await self._save(device)
        moved = device.state is not old.state or device.admin is not old.admin
        if moved:
            # Busy with a job and free after it: the job's own lines say so (at info these
            # two were a quarter of the log's bytes, two lines a job).
            routine = {device.state, old.state} == {DeviceState.BUSY, DeviceState.AVAILABLE}
            (log.debug if routine and device.admin is old.admin else log.info)(
                "device state changed",
                device=device_id,
                state=device.state.value,
                was=old.state.value,
                admin=device.admin.value,
                reason=device.reason,
            )
        if moved or (device.platform, device.model) != (old.platform, old.model):
            self.bus.publish(device_changed(device))
        return device


def device_changed(device: Device) -> DeviceChanged:
    """The event that tells what `device` is now."""
    return DeviceChanged(
        device_id=device.id,
        host=device.host,
        platform=device.platform,
        model=device.model,
        state=device.state.value,
        admin=device.admin.value,
        reason=device.reason,
    )


async def _quietly(step: Awaitable[None], what: str) -> None:
    try:
        await step
    except Exception:
        log.exception(f"{what} failed")


def _device_of(item: object, driver: str) -> tuple[Device | None, str]:
    """`item` checked whole as a device of `driver`, or None and what is wrong with it."""
    if not isinstance(item, Device):
        return None, f"a {type(item).__name__}, not a Device"
    try:
        device = Device.checked(item.model_dump())
    except Exception as e:  # built, then given an id the rules refuse (or never validated)
        return None, _first_line(e)
    if device.driver != driver:
        return None, f"its driver is {device.driver!r}, not {driver!r}"
    return device, ""


def _first_line(e: Exception) -> str:
    """A validation error's first problem, in a line ('id: String should match pattern ...')."""
    lines = str(e).splitlines()
    return " ".join(line.strip() for line in lines[1:3]) if len(lines) > 2 else str(e)


def _comparable(key: str, value: object) -> object:
    """A description's value as a change is judged: tags are a set (a driver that built them
    from one rewrote the device every pass, in another order)."""
    return sorted(value) if key == "tags" and isinstance(value, list) else value


def _unseen(reason: str) -> bool:
    """Whether a device offline for this reason waits for its driver to list it again."""
    return reason in UNSEEN or reason.startswith((UNLISTED, f"{VANISHED}: ", NOT_READY))
