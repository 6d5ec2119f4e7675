"""What labd does with an incoming MQTT message: validate it at the edge, act through the
same services as the CLI, and answer. Every refusal names every reason and goes to
<prefix>/errors; nothing a payload holds ever reaches a shell."""

from __future__ import annotations

import json
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog
from pydantic import ValidationError

from labd.config import MqttSettings
from labd.errors import InvalidSpec
from labd.model import AdminState, JobState
from labd.mqtt.messages import (
    CancelRequest,
    DeviceCommand,
    ErrorMessage,
    JobEvent,
    JobQuery,
    Message,
    QueryAnswer,
    SubmitAnswer,
    SubmitRequest,
)
from labd.mqtt.topics import Topics
from labd.pool import Pool
from labd.results import results_view
from labd.scheduler import JobService, Scheduler
from labd.store import JobConflict
from labd.validation import describe_errors

log = structlog.get_logger("labd.mqtt")

ADMIN_STATES = {
    "drain": AdminState.DRAINING,
    "enable": AdminState.ENABLED,
    "maintenance": AdminState.MAINTENANCE,
}


@dataclass(frozen=True)
class Reply:
    topic: str
    message: Message
    correlation: bytes | None = None  # echoed on an MQTT 5 response topic


class Refused(Exception):
    def __init__(self, problems: list[str], sender: str = "", job_id: str = "") -> None:
        super().__init__("; ".join(problems))
        self.problems, self.sender, self.job_id = problems, sender, job_id


class Inbound:
    def __init__(
        self,
        settings: MqttSettings,
        topics: Topics,
        jobs: JobService,
        scheduler: Scheduler,
        pool: Pool,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings, self.topics = settings, topics
        self.jobs, self.scheduler, self.pool = jobs, scheduler, pool
        self.clock = clock
        self._recent: defaultdict[str, deque[float]] = defaultdict(deque)

    async def handle(
        self, topic: str, payload: bytes, response_topic: str = "", correlation: bytes | None = None
    ) -> list[Reply]:
        """The replies to one message (never raises for bad input)."""
        try:
            if topic == self.topics.submit:
                return await self._submit(topic, payload, response_topic, correlation)
            if topic == self.topics.query:
                return await self._query(topic, payload)
            if topic.endswith("/cancel"):
                return await self._cancel(topic, payload)
            if topic.endswith("/command"):
                return await self._command(topic, payload)
            raise Refused([f"labd does not take messages on {topic}"])
        except Refused as refused:
            log.warning("mqtt input refused", topic=topic, problems=refused.problems)
            replies = [
                Reply(
                    self.topics.errors,
                    ErrorMessage(topic=topic, problems=refused.problems, sender=refused.sender),
                )
            ]
            if topic == self.topics.submit:
                replies += self._rejection(refused, response_topic, correlation)
            return replies

    def _parse(self, topic: str, payload: bytes, model: type[Message]) -> Any:
        limit = self.settings.max_payload_bytes
        if len(payload) > limit:
            raise Refused([f"{topic}: payload of {len(payload)} bytes is over the {limit} limit"])
        try:
            data = json.loads(payload.decode("utf-8")) if payload.strip() else {}
        except UnicodeDecodeError as e:
            raise Refused([f"{topic}: payload is not UTF-8 ({e.reason} at byte {e.start})"]) from e
        except ValueError as e:
            raise Refused([f"{topic}: payload is not JSON ({e})"]) from e
        try:
            return model.model_validate(data)
        except ValidationError as e:
            sender = data.get("sender", "") if isinstance(data, dict) else ""
            job_id = data.get("id", "") if isinstance(data, dict) else ""
            raise Refused(
                describe_errors(e, model, topic),
                sender=sender if isinstance(sender, str) else "",
                job_id=job_id if isinstance(job_id, str) else "",
            ) from e

    async def _submit(
        self, topic: str, payload: bytes, response_topic: str, correlation: bytes | None
    ) -> list[Reply]:
        request: SubmitRequest = self._parse(topic, payload, SubmitRequest)
        self._rate_limit(request.sender, request.id)
        try:
            source = request.source or f"mqtt {request.sender}"
            job, created = await self.jobs.submit(request.spec, source, request.id, request.sender)
        except InvalidSpec as e:
            raise Refused(e.problems, request.sender, request.id) from e
        except JobConflict as e:
            raise Refused([str(e)], request.sender, request.id) from e
        # The job's "queued" event (seq 1) went to the outbox with the job itself.
        answer = SubmitAnswer(job_id=job.id, accepted=True, duplicate=not created)
        return [Reply(response_topic, answer, correlation)] if response_topic else []

    def _rejection(
        self, refused: Refused, response_topic: str, correlation: bytes | None
    ) -> list[Reply]:
        replies = []
        if refused.job_id:
            event = JobEvent(
                event_id=f"rejected-{time.time_ns()}",
                job_id=refused.job_id,
                seq=0,
                kind="rejected",
                state="rejected",
                time=time.time(),
                host="",
                data={"problems": refused.problems},
            )
            replies.append(Reply(self.topics.job_events(refused.job_id), event))
        if response_topic:
            answer = SubmitAnswer(job_id=refused.job_id, accepted=False, problems=refused.problems)
            replies.append(Reply(response_topic, answer, correlation))
        return replies

    def _rate_limit(self, sender: str, job_id: str) -> None:
        now = self.clock()
        recent = self._recent[sender]
        while recent and now - recent[0] > 60:
            recent.popleft()
        if len(recent) >= self.settings.submits_per_minute:
            raise Refused(
                [
                    f"sender {sender!r} submitted {len(recent)} jobs in the last minute "
                    f"(limit {self.settings.submits_per_minute}); try again later"
                ],
                sender,
                job_id,
            )
        recent.append(now)

    async def _query(self, topic: str, payload: bytes) -> list[Reply]:
        query: JobQuery = self._parse(topic, payload, JobQuery)
        store = self.jobs.store
        data: dict[str, Any] = {}
        problems: list[str] = []
        if query.query == "list":
            try:
                states = [JobState(s) for s in query.states]
            except ValueError as e:
                problems.append(f"{topic}: states: {e}")
            else:
                jobs = await store.list_jobs(states, limit=query.limit)
                data = {"jobs": [j.model_dump(mode="json") for j in jobs]}
        elif (job := await store.get_job(query.job_id)) is None:
            problems.append(f"{topic}: no job {query.job_id!r}")
        elif query.query == "show":
            data = {"job": job.model_dump(mode="json")}
        else:
            data = await results_view(store, job)
        answer = QueryAnswer(query=query.query, ok=not problems, data=data, problems=problems)
        return [Reply(query.reply_to, answer)]

    async def _cancel(self, topic: str, payload: bytes) -> list[Reply]:
        request: CancelRequest = self._parse(topic, payload, CancelRequest)
        job_id = self.topics.subject(topic)
        if await self.scheduler.cancel(job_id) is None:
            raise Refused([f"{topic}: no job {job_id!r}"], request.sender)
        return []  # the outcome arrives as the job's next event

    async def _command(self, topic: str, payload: bytes) -> list[Reply]:
        command: DeviceCommand = self._parse(topic, payload, DeviceCommand)
        if command.sender not in self.settings.admin_users:
            raise Refused(
                [f"{topic}: sender {command.sender!r} is not an administrator (mqtt.admin_users)"],
                command.sender,
            )
        device_id = self.topics.subject(topic)
        if await self.pool.set_admin(device_id, ADMIN_STATES[command.action]) is None:
            raise Refused([f"{topic}: no device {device_id!r}"], command.sender)
        self.scheduler.wake()
        return []  # the new state is published on the device's retained state topic
