"""Topic names under the configured prefix, the filters labd subscribes to, and what a topic
labd publishes on may hold."""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_TOPIC_BYTES = 65_535  # MQTT's limit on a topic name, in UTF-8 bytes
# What a broker refuses in a topic name it is sent (Mosquitto then drops the sender's whole
# connection): wildcards, control characters (C0, DEL, C1), surrogates and the Unicode
# non-characters (U+FDD0-U+FDEF and the last two code points of every plane).
_UNSAFE = re.compile(
    "[#+\x00-\x1f\x7f-\x9f\ud800-\udfff\ufdd0-\ufdef"
    + "".join(chr(plane << 16 | 0xFFFE) + chr(plane << 16 | 0xFFFF) for plane in range(17))
    + "]"
)


def topic_problem(topic: str) -> str | None:
    """Why a message cannot be published on `topic` (for a broker it is malformed), or None
    when it can."""
    if not topic:
        return "is empty"
    if found := _UNSAFE.search(topic):
        char = found.group()
        if char in "#+":
            return f"contains the wildcard {char!r} at {found.start()}"
        code = ord(char)
        kind = "a surrogate" if 0xD800 <= code <= 0xDFFF else "a Unicode non-character"
        if code < 0x20 or 0x7F <= code <= 0x9F:
            kind = "a control character"
        return f"contains {kind} (U+{code:04X}) at {found.start()}"
    if (size := len(topic.encode())) > MAX_TOPIC_BYTES:
        return f"is {size} bytes long in UTF-8 (MQTT allows {MAX_TOPIC_BYTES})"
    return None


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
