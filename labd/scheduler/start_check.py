"""The last look before a job runs: can its spec start on the device it was given?

Submission checked the spec on the host that accepted it; the job may run on another host
(a program missing there, or one its policy does not allow) or in a lane a driver no longer
offers. What fails here is the spec's fault: the job fails with the reason and the device is
not blamed.
"""

from __future__ import annotations

import asyncio

from pydantic import BaseModel, ValidationError

from labd.model import Device, Job, Policy
from labd.sdk import Driver
from labd.validation import describe_errors


async def start_check(
    job: Job, device: Device, driver: Driver, policy: Policy
) -> tuple[BaseModel | None, str]:
    """(the scenario's parameters, "") when the job can start under this host's `policy`,
    else (None, why not)."""
    spec = job.spec
    scenario = driver.scenarios().get(spec.scenario)
    if scenario is None:
        return None, (
            f"device {device.id} (driver {driver.name}) does not offer scenario {spec.scenario!r}"
        )
    try:
        params = scenario.Params.model_validate(spec.params)
    except ValidationError as e:
        problems = describe_errors(e, scenario.Params, "params")
        return None, "; ".join(problems)
    # A scenario's check may look at files and processes: off the event loop.
    problems = await asyncio.to_thread(scenario.check, params)
    problems += scenario.policy_problems(params, policy)
    if problems:
        return None, f"on {device.id}: " + "; ".join(problems)
    return params, ""
