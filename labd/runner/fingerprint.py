"""What a result was measured with, and a stable hash of what must match for two results to be
comparable (device class, OS, driver, stabilisation, network, archive): `labd compare` warns
when base and new differ in it. The build is recorded but never hashed: it is what is tested."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import labd
from labd.model import Device, TestSpec
from labd.sdk import Driver

# Fingerprint keys whose values must be equal for two runs to be comparable.
COMPARABLE = ("platform", "model", "os_version", "kernel", "cpu_model", "driver", "scenario",
              "stabilisation", "network", "launcher", "run_as")  # fmt: skip


def base_fingerprint(
    spec: TestSpec, device: Device, driver: Driver, variant: str
) -> dict[str, Any]:
    """What the runner knows before the scenario adds its own."""
    return {
        "device": device.id,
        "platform": device.platform,
        "model": device.model,
        "os_version": device.os_version,
        "driver": f"{driver.name} {driver.version}",
        "labd": labd.__version__,
        "scenario": spec.scenario,
        "build": spec.build_of(variant).model_dump(),
    }


def comparable(fingerprint: dict[str, Any]) -> dict[str, Any]:
    """The part of a fingerprint two comparable runs share (the browser's name, not its
    version: a browser is often the thing under test)."""
    chosen = {k: fingerprint[k] for k in COMPARABLE if k in fingerprint}
    if browser := fingerprint.get("browser"):
        chosen["browser"] = browser.get("name")
    if isinstance(stab := chosen.get("stabilisation"), dict):
        # A fresh directory's name differs per job; whether it was on tmpfs does not.
        chosen["stabilisation"] = {
            k: (v.split(":")[0] if k == "workdir" and isinstance(v, str) else v)
            for k, v in stab.items()
            if k != "workdir" or (isinstance(v, str) and v.startswith("tmpfs:"))
        }
    return chosen


def conditions_hash(fingerprint: dict[str, Any]) -> str:
    """16 hex digits, stable across processes and hosts (canonical JSON)."""
    text = json.dumps(comparable(fingerprint), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def differences(base: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Each comparable key base and new disagree on, as 'key: base -> new'."""
    a, b = comparable(base), comparable(new)
    return [
        f"{key}: {_short(a.get(key))} -> {_short(b.get(key))}"
        for key in sorted(a.keys() | b.keys())
        if a.get(key) != b.get(key)
    ]


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 120 else text[:117] + "..."
