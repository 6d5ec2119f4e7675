"""In-memory stand-ins for the store where the database is not what a unit test is about:
each keeps what the real store would, in a dict, and records the calls a test asserts on."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from labd.model import AdminState, Device, Iteration, Job, JobState


class DeviceMemory:
    """The store's device table: what the pool reads and writes. `failing` makes every write
    fail as a database that went away would."""

    def __init__(self, devices: Sequence[Device] = ()) -> None:
        self.devices = {d.id: d for d in devices}
        self.failing = False

    async def list_devices(self, host: str | None = None) -> list[Device]:
        return [d for d in self.devices.values() if host is None or d.host == host]

    async def upsert_device(self, device: Device) -> Device:
        if self.failing:
            raise ConnectionError("database away")
        stored = self.devices.get(device.id)
        if stored is not None:  # the stored admin state wins, as in the real store
            device = device.model_copy(update={"admin": stored.admin})
        self.devices[device.id] = device
        return device

    async def set_admin(self, device_id: str, admin: AdminState) -> Device | None:
        if device_id not in self.devices:
            return None
        self.devices[device_id] = self.devices[device_id].model_copy(update={"admin": admin})
        return self.devices[device_id]

    async def get_device(self, device_id: str) -> Device | None:
        return self.devices.get(device_id)


class IterationMemory:
    """The store as the runner writes to it: the raw iterations, in order."""

    def __init__(self) -> None:
        self.iterations: list[Iteration] = []

    async def add_iteration(self, iteration: Iteration, token: str | None) -> None:
        self.iterations.append(iteration)


class LeaseMemory:
    """The store's side of settling a held job: the moves the scheduler asked for."""

    def __init__(self, lease_held: bool = True) -> None:
        self.lease_held = lease_held
        self.moves: list[tuple[str, dict[str, Any]]] = []

    async def requeue_job(self, job_id: str, token: str, error: str, **how: Any) -> bool:
        self.moves.append(("requeue", {"error": error, **how}))
        return self.lease_held

    async def finish_job(self, job_id: str, token: str, state: JobState, error: str = "") -> bool:
        self.moves.append(("finish", {"state": state, "error": error}))
        return self.lease_held


class JobMemory:
    """The store as the metrics read it: jobs by id, and whether anyone asked."""

    def __init__(self, jobs: Sequence[Job] = ()) -> None:
        self.jobs = {j.id: j for j in jobs}
        self.reads: list[str] = []
        self.dialect = "sqlite"

    async def get_job(self, job_id: str) -> Job | None:
        self.reads.append(job_id)
        return self.jobs.get(job_id)
