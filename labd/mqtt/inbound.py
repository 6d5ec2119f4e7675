"""What labd does with an incoming MQTT message: check who signed it and whether that principal
may do it, validate it at the edge, act through the same services as the API, and answer.

Brokers do not tell a subscriber who published, so identity comes only from the signature
(labd.auth.signing), never from a payload field. Every refusal names its reason on
<prefix>/errors, is audited, and does nothing; nothing a payload holds ever reaches a shell.
"""

from __future__ import annotations

import json
from typing import Any

import structlog
from paho.mqtt.client import topic_matches_sub
from pydantic import ValidationError
from sqlalchemy.exc import SQLAlchemyError

from labd.auth import (
    Action,
    Audit,
    Principal,
    Principals,
    Signed,
    redact_job,
    replies_prefix,
    verify,
)
from labd.config import AuthSettings, MqttSettings
from labd.errors import AuthError, InvalidSpec, UsageError
from labd.events import JobRejected
from labd.model import AdminState, JobState, id_problem
from labd.mqtt.flood import UnsignedFlood
from labd.mqtt.messages import (
    CancelRequest,
    DeviceCommand,
    ErrorMessage,
    JobQuery,
    Message,
    QueryAnswer,
    Request,
    RequestAnswer,
    SubmitAnswer,
    SubmitRequest,
)
from labd.mqtt.outbound import job_event_message
from labd.mqtt.requests import (
    Envelope,
    Incoming,
    Refused,
    Reply,
    Route,
    answers,
    claimed_principal,
    id_from_nonce,
    replayed,
    safe,
    shown,
    target_of,
)
from labd.mqtt.topics import Topics, topic_problem
from labd.pool import Pool
from labd.scheduler import JobService, Scheduler
from labd.store import JobConflict, NonceSeen, StoreError, results_page, storage_problem
from labd.validation import TOO_DEEP, describe_errors, too_deep

log = structlog.get_logger("labd.mqtt")

# What a request meets while the database is away (the store's own error, SQLAlchemy's, a
# refused connection): answered as "unavailable", not lost without a word.
UNAVAILABLE = (StoreError, SQLAlchemyError, OSError)

ADMIN_STATES = {
    "drain": AdminState.DRAINING,
    "enable": AdminState.ENABLED,
    "maintenance": AdminState.MAINTENANCE,
}


class Inbound:
    def __init__(
        self,
        settings: MqttSettings,
        auth: AuthSettings,
        topics: Topics,
        principals: Principals,
        jobs: JobService,
        scheduler: Scheduler,
        pool: Pool,
        audit: Audit,
    ) -> None:
        self.settings, self.auth, self.topics = settings, auth, topics
        self.principals, self.jobs, self.scheduler, self.pool = principals, jobs, scheduler, pool
        self.audit = audit
        self.unsigned = UnsignedFlood()
        self.routes = (
            Route(topics.submit, SubmitRequest, Action.SUBMIT, self._submit),
            Route(topics.query, JobQuery, Action.READ, self._query),
            Route(topics.cancel_filter, CancelRequest, Action.CANCEL, self._cancel),
            Route(topics.command_filter, DeviceCommand, Action.ADMINISTER, self._command),
        )

    def route_for(self, topic: str) -> Route | None:
        return next((r for r in self.routes if topic_matches_sub(r.filter, topic)), None)

    async def handle(
        self, topic: str, payload: bytes, response_topic: str = "", correlation: bytes | None = None
    ) -> list[Reply]:
        """The replies to one message (never raises for bad input)."""
        route = self.route_for(topic)
        claimed = correlation_claimed = ""
        signed: Signed | None = None
        incoming: Incoming | None = None
        data: dict[str, Any] = {}
        try:
            if route is None:
                raise Refused([f"labd does not take messages on {topic}"])
            data = self._parse(topic, payload)
            claimed = claimed_principal(data)
            if isinstance(data.get("correlation"), str):
                correlation_claimed = shown(data["correlation"])
            try:
                signed = verify(
                    data, topic, self.principals, self.auth.max_age_s, self.auth.clock_skew_s
                )
            except AuthError as e:
                raise Refused([f"{topic}: {e}"], e.reason) from e
            if not signed.principal.may(route.action):
                role = signed.principal.role.value
                raise Refused(
                    [f"{topic}: principal {claimed!r} ({role}) may not {route.action.value}"],
                    "forbidden",
                )
            request = self._validate(topic, data, route.model)
            # Checked before anything is answered: a refusal must not be published on a topic
            # the asker may not name (another's replies, a job's events, the alerts).
            self._check_reply_to(topic, request, signed.principal)
            incoming = Incoming(
                topic, request, signed, self._response_topic(response_topic, signed), correlation
            )
            # A submission's nonce is checked by the job service (before its rate limit) and
            # recorded in the job's own transaction; a refusal's, by _spend.
            submission = route.model is SubmitRequest
            if not submission and await self.jobs.store.nonce_seen(*self._nonce(signed)[:2]):
                raise replayed(topic)
            replies = await route.handler(incoming)
            if not submission and not await self.jobs.store.first_use(*self._nonce(signed)):
                raise replayed(topic)
        except UNAVAILABLE as e:
            # The database is away or full: say so (nothing was done; send it again).
            problem = storage_problem(e)
            log.warning("mqtt request not handled", problem=problem, error=repr(e))
            refused = Refused(
                [f"{topic}: {problem}; nothing was done, send it again"], "unavailable"
            )
            return self._refusal(topic, route, claimed, correlation_claimed, refused, incoming)
        except Refused as refused:
            if signed is None and not self.unsigned.admit():
                # A flood of unsigned messages: counted, not answered one by one.
                action = route.action.value if route else "unknown"
                target = target_of(topic, self.topics)
                self.audit.counted("mqtt", claimed, action, target, refused.reason)
                return []
            if signed is not None and refused.reason not in ("replayed", "unavailable"):
                refused = await self._spend(topic, signed, refused)
            if incoming is None and signed is not None and refused.reason != "replayed":
                # Signed, but not to be read whole: still answered on its own reply topic.
                incoming = self._envelope(topic, data, signed, response_topic, correlation)
                if route is not None and route.model is SubmitRequest and incoming.request.id:
                    refused.job_free = await self._free_unless_away(incoming.request.id)
            return self._refusal(topic, route, claimed, correlation_claimed, refused, incoming)
        except Exception as e:
            # A bug labd must own: said once to the asker, and the nonce spent, so a retained
            # copy is not handled (and logged with its traceback) again at every reconnect.
            log.exception("handling an mqtt request failed", topic=topic)
            bug = Refused([f"{topic}: labd failed handling it ({type(e).__name__})"], "internal")
            if signed is not None:
                bug = await self._spend(topic, signed, bug)
            return self._refusal(topic, route, claimed, correlation_claimed, bug, incoming)
        action = route.action.value
        self.audit.allowed("mqtt", claimed, action, target_of(topic, self.topics), "broker")
        return replies

    # Parsing and checks -----------------------------------------------------------------------

    def _parse(self, topic: str, payload: bytes) -> dict[str, Any]:
        limit = self.settings.max_payload_bytes
        if len(payload) > limit:
            raise Refused([f"{topic}: payload of {len(payload)} bytes is over the {limit} limit"])
        try:
            data = json.loads(payload.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise Refused([f"{topic}: payload is not UTF-8 ({e.reason} at byte {e.start})"]) from e
        except RecursionError as e:
            raise Refused([f"{topic}: payload is {TOO_DEEP}"]) from e
        except ValueError as e:
            raise Refused([f"{topic}: payload is not JSON ({e})"]) from e
        # One limit, checked before the signature's canonical form or validation (recursive
        # both) meets the payload: deeper than the parser's own limit or not, it is refused.
        if too_deep(data):
            raise Refused([f"{topic}: payload is {TOO_DEEP}"])
        if not isinstance(data, dict):
            raise Refused([f"{topic}: payload must be a JSON object"])
        return data

    def _validate(self, topic: str, data: dict[str, Any], model: type[Request]) -> Request:
        try:
            return model.model_validate(data)
        except ValidationError as e:
            raise Refused([safe(p) for p in describe_errors(e, model, topic)]) from e

    def _check_reply_to(self, topic: str, request: Request, principal: Principal) -> None:
        mine = replies_prefix(self.topics.prefix, principal.name)
        if request.reply_to and not request.reply_to.startswith(mine + "/"):
            raise Refused(
                [f"{topic}: reply_to must lie under {mine}/ (got {shown(request.reply_to)})"],
                "forbidden",
            )
        if isinstance(request, JobQuery) and not request.reply_to:
            raise Refused([f"{topic}: reply_to: a query needs a topic under {mine}/"])

    def _envelope(
        self,
        topic: str,
        data: dict[str, Any],
        signed: Signed,
        response_topic: str,
        correlation: bytes | None,
    ) -> Incoming:
        """The answering fields of a signed request refused before it was read whole."""

        def text(key: str, limit: int) -> str:
            value = data.get(key)
            return value if isinstance(value, str) and len(value) <= limit else ""

        mine = replies_prefix(self.topics.prefix, signed.principal.name)
        reply_to = text("reply_to", 256)
        if not reply_to.startswith(mine + "/") or topic_problem(reply_to):
            reply_to = ""
        job_id = text("id", 256)
        envelope = Envelope(
            reply_to=reply_to,
            correlation=text("correlation", 128),
            id="" if id_problem(job_id) else job_id,
            id_given="id" in data and data["id"] != "",
            query=shown(text("query", 16)),
        )
        return Incoming(
            topic, envelope, signed, self._response_topic(response_topic, signed), correlation
        )

    async def _free_unless_away(self, job_id: str) -> bool:
        try:
            return await self._free(job_id)
        except UNAVAILABLE:  # no "rejected" event then: only the answer
            return False

    def _nonce(self, signed: Signed) -> tuple[str, str, float]:
        """(principal, nonce, until when a replay would be refused as expired anyway)."""
        expires = signed.time + self.auth.max_age_s + self.auth.clock_skew_s
        return signed.principal.name, signed.nonce, expires

    async def _spend(self, topic: str, signed: Signed, refused: Refused) -> Refused:
        """Record the nonce of a request refused after its signature held, as an accepted one's
        is: a replay of it (a retained message, at every reconnect; a quota refusal sent again
        once the quota has room) is then refused as replayed, never handled again."""
        try:
            first = await self.jobs.store.first_use(*self._nonce(signed))
        except UNAVAILABLE as e:  # the refusal stands; the database is the bridge's to watch
            log.warning("nonce of a refused request not recorded", topic=topic, error=repr(e))
            return refused
        return refused if first else replayed(topic)

    def _response_topic(self, topic: str, signed: Signed) -> str:
        """An MQTT 5 response topic is honoured only under the principal's own replies, and
        only if a broker would take it (see Request.reply_to)."""
        mine = replies_prefix(self.topics.prefix, signed.principal.name)
        return topic if topic.startswith(mine + "/") and not topic_problem(topic) else ""

    def _refusal(
        self,
        topic: str,
        route: Route | None,
        claimed: str,
        correlation: str,
        refused: Refused,
        incoming: Incoming | None,
    ) -> list[Reply]:
        action = route.action.value if route else "unknown"
        detail = "; ".join(refused.problems)
        self.audit.refused(
            "mqtt", claimed, action, target_of(topic, self.topics), "broker", refused.reason, detail
        )
        error = ErrorMessage(
            topic=topic,
            problems=refused.problems,
            reason=refused.reason,
            principal=claimed,
            correlation=correlation,
        )
        replies = [Reply(self.topics.errors, error)]
        # Only a principal whose signature held is answered, on its own topics. A replay is
        # answered on <prefix>/errors only: its reply_to is its first sender's, who has had
        # the answer already.
        if incoming is not None and refused.reason != "replayed":
            request = incoming.request
            model = route.model if route else None
            answer: Message
            if model is SubmitRequest:
                # The id the job would have had: the one sent, else the nonce's (as an
                # accepted submission without one gets). An invalid id is not echoed.
                invalid = isinstance(request, Envelope) and request.id_given and not request.id
                job_id = request.id or (
                    "" if invalid else id_from_nonce(incoming.principal.name, incoming.signed.nonce)
                )
                answer = SubmitAnswer(
                    job_id=job_id,
                    accepted=False,
                    problems=refused.problems,
                    correlation=request.correlation,
                    reason=refused.reason,
                )
                # A "rejected" event goes on the job's topic only when no job has that id: the
                # events of an existing job (anyone's) are its own, never a refusal's.
                if refused.job_free:
                    rejected = JobRejected(
                        job_id=job_id,
                        source=request.source or topic,
                        problems=refused.problems,
                        reason=refused.reason,
                        principal=incoming.principal.name,
                    )
                    message = job_event_message(rejected, seq=0, host="")
                    replies.append(Reply(self.topics.job_events(job_id), message))
            elif model is JobQuery:
                answer = QueryAnswer(
                    query=request.query,
                    ok=False,
                    problems=refused.problems,
                    correlation=request.correlation,
                    reason=refused.reason,
                )
            else:
                answer = RequestAnswer(
                    ok=False,
                    problems=refused.problems,
                    correlation=request.correlation,
                    reason=refused.reason,
                )
            replies += answers(incoming, answer)
        return replies

    # Handlers ---------------------------------------------------------------------------------

    async def _submit(self, incoming: Incoming) -> list[Reply]:
        request: SubmitRequest = incoming.request
        principal = incoming.principal
        # A request without an id gets one from its nonce: the broker delivering it twice
        # (QoS 1 after a reconnect) then makes a duplicate, never a second job.
        job_id = request.id or id_from_nonce(principal.name, incoming.signed.nonce)
        try:
            source = request.source or f"mqtt {principal.name}"
            job, created = await self.jobs.submit(
                request.spec,
                source,
                job_id,
                principal=principal,
                nonce=self._nonce(incoming.signed),
            )
        except NonceSeen as e:
            raise replayed(incoming.topic) from e
        except AuthError as e:
            raise Refused([str(e)], e.reason, await self._free(job_id)) from e
        except InvalidSpec as e:
            raise Refused(e.problems, "invalid_spec", await self._free(job_id)) from e
        except JobConflict as e:
            raise Refused([str(e)], "conflict") from e
        # The job's "queued" event (seq 1) went to the outbox with the job itself.
        answer = SubmitAnswer(
            job_id=job.id,
            accepted=True,
            duplicate=not created,
            state=job.state.value,
            correlation=request.correlation,
        )
        return answers(incoming, answer)

    async def _free(self, job_id: str) -> bool:
        """Whether no job has this id (a refusal may then announce itself on its topic)."""
        return await self.jobs.store.get_job(job_id) is None

    async def _query(self, incoming: Incoming) -> list[Reply]:
        query: JobQuery = incoming.request
        store = self.jobs.store
        data: dict[str, Any] = {}
        problems: list[str] = []
        reason = "invalid"  # when there are problems
        if query.query == "list":
            try:
                states = [JobState(s) for s in query.states]
            except ValueError as e:
                problems.append(f"{incoming.topic}: states: {safe(str(e))}")
            else:
                jobs = await store.list_jobs(states, limit=query.limit)
                data = {"jobs": [redact_job(j.model_dump(mode="json")) for j in jobs]}
        elif not query.job_id:
            raise Refused([f"{incoming.topic}: job_id: required for a {query.query} query"])
        elif (job := await store.get_job(query.job_id)) is None:
            problems.append(f"{incoming.topic}: no job {query.job_id!r}")
            reason = "not_found"
        elif query.query == "show":
            data = {"job": redact_job(job.model_dump(mode="json"))}
        elif query.query == "perfherder":
            try:
                data = {"perfherder": await self.jobs.perfherder_export(job)}
            except UsageError as e:
                problems.append(f"{incoming.topic}: {safe(str(e))}")
        else:  # one page at a time: an answer stays small however long the job ran
            data = await results_page(store, job, query.offset, query.limit)
        answer = QueryAnswer(
            query=query.query,
            ok=not problems,
            data=data,
            problems=problems,
            reason=reason if problems else "",
            correlation=query.correlation,
        )
        return answers(incoming, answer)

    async def _cancel(self, incoming: Incoming) -> list[Reply]:
        request: CancelRequest = incoming.request
        job_id = self._subject(incoming.topic, "job id")
        job = await self.jobs.store.get_job(job_id)
        if job is None:
            raise Refused([f"{incoming.topic}: no job {job_id!r}"], "not_found")
        if not incoming.principal.may_cancel(job.submitter):
            raise Refused(
                [
                    f"{incoming.topic}: principal {incoming.principal.name!r} may not cancel "
                    f"job {job_id!r} of {job.submitter!r}"
                ],
                "forbidden",
            )
        await self.scheduler.cancel(job_id)
        # The outcome also arrives as the job's next event.
        return answers(incoming, RequestAnswer(ok=True, correlation=request.correlation))

    async def _command(self, incoming: Incoming) -> list[Reply]:
        command: DeviceCommand = incoming.request
        device_id = self._subject(incoming.topic, "device id")
        if await self.pool.set_admin(device_id, ADMIN_STATES[command.action]) is None:
            raise Refused([f"{incoming.topic}: no device {device_id!r}"], "not_found")
        self.scheduler.wake()
        # The new state is published on the device's retained state topic.
        return answers(incoming, RequestAnswer(ok=True, correlation=command.correlation))

    def _subject(self, topic: str, what: str) -> str:
        """The id a topic names; a name no job or device could have is refused with the rule
        (not answered "no such job", which would send the asker looking for one)."""
        subject = self.topics.subject(topic)
        if problem := id_problem(subject, what):
            raise Refused([f"{topic}: {problem}"])
        return subject
