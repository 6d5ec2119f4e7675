"""The bridge between labd and an MQTT broker.

Out: the outbox drained at least once with QoS 1 (job events, then the job's retained state
and, when it finishes, its result summary), devices' retained state, this host's retained
status with an "offline" last will. In: submissions, cancellations, device commands (see
`inbound`). While the broker is away jobs run on, their events wait in the outbox, and the
bridge reconnects with exponential backoff and jitter.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

import aiomqtt
import structlog
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from labd import __version__
from labd.config import MqttSettings
from labd.events import (
    ComponentDown,
    ComponentUp,
    DeviceChanged,
    Event,
    EventBus,
    JobFinished,
    OutboxRowSetAside,
    deserialise,
)
from labd.model import DeviceState, Job
from labd.mqtt.client import (
    admits_anonymous,
    broker_client,
    broker_credentials,
    encode,
    json_bytes,
    publish,
)
from labd.mqtt.flood import InboxOverflow
from labd.mqtt.inbound import Inbound
from labd.mqtt.messages import (
    HostStatus,
    JobStateMessage,
    ResultMessage,
)
from labd.mqtt.outbound import publications
from labd.mqtt.requests import Reply
from labd.mqtt.topics import Topics
from labd.pool import Pool, device_changed
from labd.store import OutboxRow, Store, digest_of, out_of_space
from labd.tasks import Failures, TaskSet

log = structlog.get_logger("labd.mqtt")

UNSUPPORTED_PROTOCOL = 132  # CONNACK reason code of a broker that speaks MQTT 3.1.1 only
COMPONENT = "mqtt"
HEALTHY_SESSION_S = 10.0  # a session that ran this long failed afresh: backoff starts over
# What the client library or the row itself raises for a row that can never be published (a
# wildcard or a control character in its topic, a body missing its fields). Anything else (the
# broker gone, the database away for a moment) ends the session and the row is tried again.
UNPUBLISHABLE = (ValueError, TypeError, KeyError, UnicodeError)
DRAIN_BATCH = 100
# labd's own status must come back from the broker this fast, or it refuses labd's publishes.
ECHO_WITHIN_S = 10.0
# Delivered rows a full disk would not let us delete are tried again this much later.
FORGET_RETRY_S = 30.0
FORGET_AFTER_S = 0.5  # quiet time before delivered outbox rows are deleted
# Answers waiting for the broker: past this, reading waits (and the bounded inbox takes the
# flood); unbounded, a signed flood whose answers the broker acknowledged slowly grew without end.
ANSWERS_WAITING = 1_000
# The artefact fields of a job's result message (artefacts, artefacts_left_out, ...).
ArtefactLinks = Callable[[Job], Awaitable[dict[str, Any]]]


class StoreAway(aiomqtt.MqttError):
    """labd leaves the broker while its database is away (requests then wait at the broker)."""


class BrokerRefuses(aiomqtt.MqttError):
    """The broker took labd's publishes and did not deliver them (an ACL, most likely)."""


class MqttBridge:
    name = "mqtt"

    def __init__(
        self,
        settings: MqttSettings,
        address: tuple[str, int],
        topics: Topics,
        host: str,
        client_id: str,
        store: Store,
        inbound: Inbound,
        pool: Pool,
        bus: EventBus,
        mqtt5: bool = True,
        credentials: tuple[str, str] | None = None,
        artefact_links: ArtefactLinks | None = None,
        down: Mapping[str, str] | None = None,
    ) -> None:
        """`down`: the components already down when the bridge is made (their events went
        out before it listened: a daemon started on a full disk said "online")."""
        self.settings, self.address, self.topics = settings, address, topics
        self.host, self.client_id = host, client_id
        self.store, self.inbound, self.pool, self.bus = store, inbound, pool, bus
        self.connected = False
        self.protocol = aiomqtt.ProtocolVersion.V5 if mqtt5 else aiomqtt.ProtocolVersion.V311
        self.last_error = "not connected yet"
        self.credentials = credentials or broker_credentials(settings)
        # A broker labd did not start is checked once for clients with no account: the
        # embedded one never admits them.
        self._anonymous_unchecked = credentials is None
        self._down: dict[str, str] = dict(down or {})  # failed components, for the status
        self._artefact_links = artefact_links
        self._client: aiomqtt.Client | None = None
        self._overflow = InboxOverflow(inbound.audit)  # what arrives faster than labd reads
        self._echo, self._echoed = b"", asyncio.Event()  # labd's status, seen back or not
        self._tasks = TaskSet("mqtt")
        self._wake = asyncio.Event()
        self._devices = bus.subscribe("mqtt-devices", DeviceChanged)
        self._activity = bus.subscribe("mqtt-outbox")  # any event may have queued a row
        self._health = bus.subscribe("mqtt-health", ComponentDown, ComponentUp)

    async def start(self) -> None:
        self._tasks.spawn("connection", self._connection_loop())
        self._tasks.spawn("wake", self._wake_on_events())
        self._tasks.spawn("health", self._follow_health())

    async def stop(self, grace: float) -> None:
        client = self._client
        if client is not None and self.connected:
            await self._devices_offline(client)
            try:  # a clean goodbye; the last will covers the unclean ones
                await client.publish(
                    self.topics.host_status(self.host),
                    self._status("offline"),
                    1,
                    True,
                    timeout=2,
                )
            except Exception as e:
                log.warning("could not publish offline status", error=str(e))
        await self._tasks.cancel_all()
        self.bus.unsubscribe(self._devices)
        self.bus.unsubscribe(self._activity)
        self.bus.unsubscribe(self._health)

    async def _devices_offline(self, client: aiomqtt.Client) -> None:
        """Retain this host's devices as offline before it says goodbye: the pool marks them
        so only after the bridge has stopped, and their retained states said "available" for
        as long as labd stayed away. (After a crash the host's last will says `offline`; its
        devices' states are then as they were, to be read with it.)"""
        for device in list(self.pool.devices.values()):
            gone = device.model_copy(
                update={"state": DeviceState.OFFLINE, "reason": "labd stopped"}
            )
            try:
                await asyncio.wait_for(self._publish(client, device_changed(gone), device.id), 2)
            except Exception as e:
                log.warning(
                    "could not publish a device as offline", device=ascii(device.id), error=str(e)
                )
                return

    async def probe(self) -> str | None:
        """For /readyz: None when connected, else why not."""
        if self.connected:
            return None
        host, port = self.address
        return f"broker {host}:{port} not connected: {self.last_error}"

    # Connection -------------------------------------------------------------------------------

    def _status(self, status: Literal["online", "offline"]) -> bytes:
        state: Literal["online", "degraded", "offline"] = status
        if status == "online" and self._down:
            state = "degraded"
        message = HostStatus(
            host=self.host,
            status=state,
            version=__version__,
            down=self._down,
            max_payload_bytes=self.settings.max_payload_bytes,
        )
        return encode(message)

    def _client_for(self) -> aiomqtt.Client:
        will = aiomqtt.Will(self.topics.host_status(self.host), self._status("offline"), 1, True)
        return broker_client(
            self.settings,
            self.address,
            self.client_id,
            self.protocol,
            self.credentials,
            will,
            self._overflow.inbox(),
        )

    async def _connection_loop(self) -> None:
        delay = 0.5
        while True:
            began = time.monotonic()
            try:
                # Off the broker while the database is away: QoS 1 requests then wait in
                # labd's session at the broker instead of arriving to be refused.
                await self._until_store_answers()
                async with self._client_for() as client:
                    # Connected for /readyz, the metric and the log once the broker is seen
                    # delivering (`_delivering`).
                    self._client = client
                    await self._session(client)
            except aiomqtt.MqttCodeError as e:
                if e.rc == UNSUPPORTED_PROTOCOL and self.protocol == aiomqtt.ProtocolVersion.V5:
                    log.info("broker speaks MQTT 3.1.1 only; using it")
                    self.protocol = aiomqtt.ProtocolVersion.V311
                    continue
                self._lost(str(e))
            except aiomqtt.MqttError as e:
                self._lost(str(e))
            except Exception as e:
                # A bug or a library's surprise: the bridge must not end over it. Say so loudly,
                # mark the component down, and start a fresh session after the backoff.
                log.exception("mqtt session failed; reconnecting", broker=self.address)
                self._lost(f"session failed: {type(e).__name__}: {e}")
                self.bus.publish(
                    ComponentDown(component=COMPONENT, error=self.last_error, retry_in_s=delay)
                )
            if time.monotonic() - began >= HEALTHY_SESSION_S:
                delay = 0.5  # it had run well: this is a fresh failure, not a loop of them
            wait = delay * random.uniform(0.5, 1.5)  # jitter: hosts must not reconnect in step
            await asyncio.sleep(wait)
            delay = min(delay * 2, self.settings.reconnect_max_s)

    async def _until_store_answers(self) -> None:
        delay = 0.5
        while (problem := await self.store.ping()) is not None:
            if self._down.get("store") != problem:
                log.warning("mqtt: waiting for the database before taking requests", error=problem)
            self._down["store"] = problem
            await asyncio.sleep(delay * random.uniform(0.5, 1.5))
            delay = min(delay * 2, self.settings.reconnect_max_s)
        self._down.pop("store", None)

    def _lost(self, error: str) -> None:
        if self.connected or self.last_error != error:  # said once per kind of failure
            log.warning("mqtt connection lost; reconnecting", broker=self.address, error=error)
        self.connected, self._client, self.last_error = False, None, error

    async def _session(self, client: aiomqtt.Client) -> None:
        inputs = (self.topics.submit, self.topics.query, self.topics.cancel_filter)
        for topic in (*inputs, self.topics.command_filter):
            await client.subscribe(topic, qos=1)
        # Online only once subscribed: a client that sees "online" may submit at once. This
        # session runs, so the bridge itself is not down, whatever the events still say.
        self._down.pop(COMPONENT, None)
        # labd's own status must come back to it before any event is taken as delivered: a
        # broker whose ACL refuses labd's publishes acknowledges them all the same (MQTT
        # 3.1.1 has no way to say no), and every event used to be dropped in silence.
        status = self.topics.host_status(self.host)
        await client.subscribe(status, qos=1)
        self._echo, self._echoed = self._status("online"), asyncio.Event()
        await client.publish(status, self._echo, 1, True)
        for device in list(self.pool.devices.values()):
            await self._publish(client, device_changed(device), device.id)
        self.bus.publish(ComponentUp(component=COMPONENT))
        answers: asyncio.Queue[Reply] = asyncio.Queue(ANSWERS_WAITING)
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self._read(client, answers), name="mqtt:read")
                group.create_task(self._answer(client, answers), name="mqtt:answer")
                group.create_task(self._drain(client), name="mqtt:drain")
                group.create_task(self._follow_devices(client), name="mqtt:devices")
        except* Exception as failed:
            error = failed.exceptions[0]
            if not isinstance(error, aiomqtt.MqttError) and await self.store.ping():
                # The database went away: say so on the retained status before leaving.
                self._down["store"] = f"{type(error).__name__}: {error}"
                with contextlib.suppress(Exception):
                    topic = self.topics.host_status(self.host)
                    await client.publish(topic, self._status("online"), 1, True, timeout=2)
                # The broker is fine: /readyz must not blame it (nor log a traceback).
                raise StoreAway(
                    f"left the broker while the database is unreachable ({self._down['store']})"
                ) from None
            raise error from None

    # In ---------------------------------------------------------------------------------------

    async def _read(self, client: aiomqtt.Client, answers: asyncio.Queue[Reply]) -> None:
        status = self.topics.host_status(self.host)
        async for message in client.messages:
            props = message.properties
            response = getattr(props, "ResponseTopic", "") or ""
            correlation = getattr(props, "CorrelationData", None)
            payload = message.payload if isinstance(message.payload, bytes) else b""
            if isinstance(message.payload, str):
                payload = message.payload.encode()
            if message.topic.value == status:  # labd's own, back from the broker
                if payload == self._echo:
                    self._echoed.set()
                continue
            started = time.perf_counter()
            try:
                replies = await self.inbound.handle(
                    message.topic.value, payload, response, correlation
                )
            except Exception:
                log.exception("handling an mqtt message failed", topic=message.topic.value)
                continue
            for reply in replies:
                await answers.put(reply)
            log.debug(
                "mqtt message handled",
                topic=message.topic.value,
                ms=round(1000 * (time.perf_counter() - started), 2),
            )
            # Messages already queued come without a pause: a flood held the event loop (and
            # every lease heartbeat) for over a second.
            await asyncio.sleep(0)

    async def _answer(self, client: aiomqtt.Client, answers: asyncio.Queue[Reply]) -> None:
        """Publishes the answers `_read` leaves, in order. Apart from reading: each waits for
        the broker's acknowledgement, which during a flood comes behind thousands of messages
        (read one at a time, the answers held reading to 22 messages a second)."""
        while True:
            reply = await answers.get()
            try:
                await self._reply(client, reply)
            except aiomqtt.MqttError:
                raise  # the connection is gone: reconnect
            except Exception:  # one bad answer must not cut the lab off the broker
                log.exception("an mqtt answer could not be published", topic=reply.topic)

    async def _reply(self, client: aiomqtt.Client, reply: Reply) -> None:
        properties = None
        if reply.correlation is not None and self.protocol == aiomqtt.ProtocolVersion.V5:
            properties = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
            properties.CorrelationData = reply.correlation
        await publish(client, reply.topic, encode(reply.message), properties=properties)

    # Out --------------------------------------------------------------------------------------

    async def _wake_on_events(self) -> None:
        async for _ in self._activity:
            self._wake.set()

    async def _delivering(self) -> None:
        """Return once labd's own status came back from the broker; else BrokerRefuses."""
        try:
            async with asyncio.timeout(ECHO_WITHIN_S):
                await self._echoed.wait()
            self.connected = True
            log.info("mqtt connected", broker=self.address, protocol=self.protocol.name)
            if self._anonymous_unchecked:
                self._anonymous_unchecked = False
                self._tasks.spawn("anonymous-check", self._say_if_anonymous())
        except TimeoutError:
            raise BrokerRefuses(
                f"the broker did not deliver labd's own status on "
                f"{self.topics.host_status(self.host)} back within {ECHO_WITHIN_S:g} s: it does "
                "not let labd publish there, or read it (check its ACL for labd's user); no "
                "event is taken as delivered meanwhile"
            ) from None

    async def _say_if_anonymous(self) -> None:
        """A broker that admits anyone lets anyone publish states and results in labd's
        name unless its ACL forbids it, which labd cannot see: said, not refused (a lab may
        keep strangers off its network instead)."""
        if await admits_anonymous(self.settings, self.address, self.protocol):
            host, port = self.address
            log.warning(
                "mqtt broker admits anonymous clients",
                broker=f"{host}:{port}",
                risk="anyone who reaches it can read labd's topics and, unless its ACL forbids "
                "it, publish job states, results and alerts in labd's name",
                hint="give it accounts and an ACL (`labd auth mosquitto` writes them), or let "
                "labd start its embedded broker (no mqtt.url, nothing on mqtt.embedded_port)",
            )

    async def _drain(self, client: aiomqtt.Client) -> None:
        await self._delivering()
        # Delivered rows are forgotten in batches, when the outbox goes quiet or a batch is
        # full: a DELETE committed after every event held up the next submission's commit.
        # Until then they are skipped here; after a crash they go out again, which
        # at-least-once allows (consumers drop duplicates by event_id).
        delivered: set[int] = set()
        full, retry_at = Failures("forgetting delivered events", log), 0.0
        # The newest event of each job already queued: a backlog (a broker away, or a
        # restart after a crash, which sends again what it had sent and not yet forgotten)
        # updates a job's retained state once, to that event's, not through every state it
        # passed, which after a crash took the broker's "succeeded" back to "queued".
        newest = await self.store.outbox_newest()

        async def forget() -> None:
            nonlocal retry_at
            if time.monotonic() < retry_at:
                return
            try:
                await self.store.outbox_done(sorted(delivered))
            except Exception as e:
                if not out_of_space(e):
                    raise
                # A full disk refuses even a DELETE: the broker is fine, so stay connected
                # and go on skipping these rows until the disk has room again.
                full.failed(e)
                retry_at = time.monotonic() + FORGET_RETRY_S
                return
            full.succeeded()
            delivered.clear()

        while True:
            self._wake.clear()
            rows = await self.store.outbox_pending(DRAIN_BATCH, skip=delivered)
            try:
                for row in rows:
                    try:
                        latest = row.stream != "job" or row.seq >= newest.get(row.key, 0)
                        await self._deliver(client, row, latest)
                    except UNPUBLISHABLE as e:
                        await self._set_aside(row, e)
                        continue
                    delivered.add(row.id)
            except aiomqtt.MqttError:
                # Forget what did get through, then let the connection loop reconnect. Not on
                # cancellation: a write then could leave SQLite's write lock held at shutdown,
                # and a row delivered twice is allowed.
                await forget()
                raise
            if len(delivered) >= DRAIN_BATCH:
                await forget()
            if len(rows) < DRAIN_BATCH:
                try:  # events wake us at once; the poll catches rows of a restarted daemon
                    async with asyncio.timeout(FORGET_AFTER_S):
                        await self._wake.wait()
                except TimeoutError:
                    await forget()

    async def _set_aside(self, row: OutboxRow, error: Exception) -> None:
        """A row the client library refuses (its topic or payload) would block every row
        behind it, after every restart: keep it aside with the reason and go on."""
        reason = f"{type(error).__name__}: {error}"
        log.error(
            "outbox row set aside: it cannot be published",
            row=row.id,
            stream=row.stream,
            key=ascii(row.key),
            error=reason,
        )
        await self.store.outbox_set_aside(row, reason)
        self.bus.publish(OutboxRowSetAside(stream=row.stream, key=ascii(row.key), error=reason))

    async def _deliver(self, client: aiomqtt.Client, row: OutboxRow, newest: bool) -> None:
        """Publish a row's messages; a job's retained state only from its `newest` row."""
        if "event" not in row.body:
            await self._deliver_written_as_message(client, row)
            return
        event = deserialise(row.body)
        await self._publish(client, event, row.key, row.seq, newest)
        if isinstance(event, JobFinished):
            await self._publish_result(client, row.key)

    async def _deliver_written_as_message(self, client: aiomqtt.Client, row: OutboxRow) -> None:
        """A row an older labd queued as the message itself (before typed events)."""
        if row.stream == "alert":
            await publish(client, self.topics.alerts, json_bytes(row.body))
            return
        body = row.body
        await publish(client, self.topics.job_events(row.key), json_bytes(body))
        state = JobStateMessage(job_id=row.key, state=body["state"], seq=row.seq, time=body["time"])
        await publish(client, self.topics.job_state(row.key), encode(state), True)
        if body["kind"] == "finished":
            await self._publish_result(client, row.key)

    async def _publish_result(self, client: aiomqtt.Client, job_id: str) -> None:
        job = await self.store.get_job(job_id)
        if job is None:
            return
        digest = await digest_of(self.store, job)
        result = ResultMessage(
            job_id=job.id,
            suite=job.spec.suite,
            test=job.spec.test,
            state=job.state.value,
            device_id=job.device_id,
            build=job.spec.build.model_dump(),
            summary=digest["summary"],
            set_aside=digest["set_aside"],
            **await self._links(job),
        )
        topic = self.topics.results(job.spec.suite, job.spec.test)
        await publish(client, topic, encode(result))

    async def _links(self, job: Job) -> dict[str, Any]:
        """The job's artefact URLs (a bounded number, and how many more); a listing that fails
        costs the result its links only."""
        if self._artefact_links is None:
            return {}
        try:
            return await self._artefact_links(job)
        except Exception as e:
            log.warning("artefacts not listed in the result", job=ascii(job.id), error=repr(e))
            return {}

    async def _follow_devices(self, client: aiomqtt.Client) -> None:
        async for event in self._devices:
            assert isinstance(event, DeviceChanged)
            try:
                await self._publish(client, event, event.device_id)
            except aiomqtt.MqttError:
                raise
            except Exception:
                log.exception("device state could not be published", device=ascii(event.device_id))

    async def _follow_health(self) -> None:
        """Keep the retained host status saying which components are down."""
        async for event in self._health:
            if isinstance(event, ComponentDown):
                self._down[event.component] = event.error
            elif isinstance(event, ComponentUp):
                self._down.pop(event.component, None)
            else:
                continue
            client = self._client
            if client is not None and self.connected and event.component != COMPONENT:
                try:
                    topic = self.topics.host_status(self.host)
                    await client.publish(topic, self._status("online"), 1, True)
                except Exception as e:  # the connection loop deals with a lost broker
                    log.debug("host status not updated", error=str(e))

    async def _publish(
        self, client: aiomqtt.Client, event: Event, key: str, seq: int = 0, state: bool = True
    ) -> None:
        """Publish what the outbound table makes of `event` (queued under `key`); with
        `state` false, not a job's retained state."""
        expiry = expiry_s(self.settings.ended_state_expiry_h)
        for out in publications(event, key, seq, self.host, self.topics, expiry):
            if out.retain and not state:
                continue
            properties = None
            if out.expiry_s and self.protocol == aiomqtt.ProtocolVersion.V5:
                properties = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
                properties.MessageExpiryInterval = out.expiry_s
            await publish(client, out.topic, encode(out.message), out.retain, properties)


def expiry_s(hours: float) -> int:
    """MQTT 5's message expiry for `hours` (0: none). A fraction of a second is 1 s, not 0,
    which would keep the message for ever."""
    return max(1, round(hours * 3600)) if hours else 0
