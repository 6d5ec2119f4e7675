"""Secrets stay secret on every read path: a job's `params.env` values and any field whose name
says it is a secret (password, token, ...) are masked in every answer labd gives (API, MQTT,
CLI, reports, logs). The store keeps them in the spec: the job needs them to run. Text the job's
program produced (its error) may quote them: `spec_secrets` gives what to mask in it."""

from __future__ import annotations

from typing import Any

from labd.redact import MASK, MIN_MASKABLE, is_secret_name


def redact_params(params: dict[str, Any]) -> dict[str, Any]:
    """A scenario's parameters with every environment value and secret field masked."""
    return {key: _masked(key, value, in_env=key == "env") for key, value in params.items()}


def _masked(key: str, value: Any, in_env: bool = False) -> Any:
    if in_env and isinstance(value, dict):
        return dict.fromkeys(value, MASK)
    if is_secret_name(key) and value not in ("", None):
        return MASK
    if isinstance(value, dict):
        return {k: _masked(k, v, in_env=k == "env") for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(key, v) for v in value]
    return value


def redact_job(job: dict[str, Any]) -> dict[str, Any]:
    """A job as JSON data (`Job.model_dump(mode="json")`) fit to show anyone: its spec's
    parameters redacted (the base and variant parameters of an A/B job too)."""
    spec = job.get("spec")
    if not isinstance(spec, dict):
        return job
    return {**job, "spec": redact_spec(spec)}


def redact_spec(spec: dict[str, Any]) -> dict[str, Any]:
    out = {k: _masked(k, v) for k, v in spec.items() if k != "params"}
    if isinstance(spec.get("params"), dict):
        out["params"] = redact_params(spec["params"])
    return out


def spec_secrets(spec: dict[str, Any]) -> list[str]:
    """Every value `redact_spec` masks (environment values, secret fields; of an A/B job's
    variants too) that is long enough to be masked in free text (`MIN_MASKABLE`)."""
    found: set[str] = set()
    _collect(spec, False, found)
    return sorted(s for s in found if len(s) >= MIN_MASKABLE)


def _collect(value: Any, secret: bool, found: set[str]) -> None:
    if isinstance(value, str):
        if secret:
            found.add(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            _collect(item, secret or key == "env" or is_secret_name(str(key)), found)
    elif isinstance(value, list):
        for item in value:
            _collect(item, secret, found)
