"""The simulated driver: N devices on this host, each running the `sim` scenario.

An iteration sleeps for the time its parameters name and reports its own index, so a run's
raw values say exactly which iterations were stored: a lost or duplicated value shows.
"""

from __future__ import annotations

import asyncio
import time

from pydantic import BaseModel, ConfigDict, Field

from labd.sdk import Device, Driver, MetricSpec, Scenario


class SimOptions(BaseModel):
    """Options of the simulated driver (`[drivers.sim]`)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(False, description="Offer simulated devices (chaos runs, demos).")
    devices: int = Field(2, ge=1, le=1000, description="Simulated devices on this host.")
    prefix: str = Field(
        "",
        max_length=64,
        pattern=r"^[A-Za-z0-9_.-]*$",
        description="Device id prefix; empty means sim-<host>-.",
    )


class SimParams(BaseModel):
    """Parameters of the `sim` scenario."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    iteration_s: float = Field(0.1, ge=0, le=3600, description="How long one iteration takes.")


class SimScenario(Scenario[SimParams]):
    name = "sim"
    # Every metric has a unit, or each job logs that Perfherder cannot take it (a tester counted
    # 2,976 such warnings, a tenth of a long run's log).
    default_metrics = (
        MetricSpec(name="index", unit="count"),
        MetricSpec(name="iteration_ms", unit="ms"),
    )

    async def run_iteration(self, index: int) -> dict[str, float]:
        start = time.perf_counter()
        await asyncio.sleep(self.params.iteration_s)
        return {"index": float(index), "iteration_ms": (time.perf_counter() - start) * 1000}


class SimDriver(Driver[SimOptions]):
    name = "sim"
    platform = "sim"
    version = "1"
    scenario_types = (SimScenario,)

    async def discover(self) -> list[Device]:
        prefix = self.options.prefix or f"sim-{self.host}-"
        return [
            Device(id=f"{prefix}{n}", driver=self.name, platform=self.platform, model="sim")
            for n in range(self.options.devices)
        ]
