"""Topic names under the configured prefix, and the filters labd subscribes to."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Topics:
    prefix: str

    @property
    def submit(self) -> str:
        return f"{self.prefix}/jobs/submit"

    @property
    def query(self) -> str:
        return f"{self.prefix}/jobs/query"

    @property
    def cancel_filter(self) -> str:
        return f"{self.prefix}/jobs/+/cancel"

    @property
    def command_filter(self) -> str:
        return f"{self.prefix}/devices/+/command"

    @property
    def alerts(self) -> str:
        return f"{self.prefix}/alerts"

    @property
    def errors(self) -> str:
        return f"{self.prefix}/errors"

    def job_events(self, job_id: str) -> str:
        return f"{self.prefix}/jobs/{job_id}/events"

    def job_state(self, job_id: str) -> str:
        return f"{self.prefix}/jobs/{job_id}/state"

    def device_state(self, device_id: str) -> str:
        return f"{self.prefix}/devices/{device_id}/state"

    def host_status(self, host: str) -> str:
        return f"{self.prefix}/hosts/{host}/status"

    def results(self, suite: str, test: str) -> str:
        return f"{self.prefix}/results/{suite}/{test}"

    def subject(self, topic: str) -> str:
        """The <id> of .../jobs/<id>/cancel or .../devices/<id>/command."""
        return topic[len(self.prefix) + 1 :].split("/")[1]
