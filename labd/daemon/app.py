"""The daemon: wires the components, starts them in order, stops them in reverse.

SIGTERM/SIGINT stop it gracefully within `daemon.shutdown_grace`; SIGHUP reloads the
configuration where that is safe and keeps the old one when the new file is invalid.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import sqlite3
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

import structlog

from labd import __version__
from labd.acceptor import raise_open_files_limit
from labd.artefacts import ArtefactKeeper
from labd.auth import Audit, Credentials, Principals, RateLimiter, ensure_local_credentials
from labd.config import LoadedConfig, Settings, StoreSettings, load_config
from labd.daemon.health import ComponentHealth
from labd.daemon.http import SidePort
from labd.daemon.looplag import monitor_loop_lag
from labd.daemon.statedir import lock_state_dir, prepare_state_dir, state_dir_id
from labd.daemon.systemd import SystemdNotifier
from labd.errors import EXIT_OK, EXIT_RUNTIME, ConfigError, LabdError
from labd.events import ConfigRejected, ConfigReloaded, DaemonStarted, DaemonStopping, EventBus
from labd.logs import set_level
from labd.metrics import (
    AccessMetrics,
    ArtefactCollector,
    DaemonMetrics,
    LabMetrics,
    RetentionCollector,
)
from labd.model import Policy
from labd.mqtt import (
    Accounts,
    ArtefactLinks,
    EmbeddedBroker,
    Inbound,
    MqttBridge,
    Topics,
    default_client_id,
    listening,
)
from labd.pool import Pool, load_drivers, load_power, run_refusals
from labd.runner import with_archive_dir
from labd.scheduler import BaselineAnalyst, JobService, Scheduler
from labd.store import (
    HostName,
    Retention,
    Store,
    causes,
    default_sqlite_url,
    free_bytes,
    out_of_space,
)
from labd.tasks import TaskSet

log = structlog.get_logger("labd.daemon")

STOP_SLACK = 5.0  # seconds a component may take to close after its grace ran out

# Keys a running daemon applies on SIGHUP; every other change waits for a restart.
RELOADABLE = frozenset({"log.level"})


class Component(Protocol):
    """A part of the daemon with a lifecycle. `stop` gets the seconds of grace left."""

    name: str

    async def start(self) -> None: ...

    async def stop(self, grace: float) -> None: ...


@runtime_checkable
class TakesWork(Protocol):
    """A component that starts new work by itself (the scheduler leases jobs)."""

    def stop_taking_work(self) -> None: ...


class StoreComponent:
    """Opens the store (applying migrations) first and closes it last."""

    name = "store"

    def __init__(
        self,
        url: str,
        host: str,
        bus: EventBus,
        name_lost: Callable[[str], None],
        delivers_outbox: bool = True,
        settings: StoreSettings | None = None,
    ) -> None:
        self.url, self.host, self.bus, self.name_lost = url, host, bus, name_lost
        self.delivers_outbox = delivers_outbox  # False: no MQTT bridge here empties it
        self.settings = settings or StoreSettings()
        self._store: Store | None = None
        self.retention: Retention | None = None
        self._name: HostName
        self._tasks = TaskSet("store")

    @property
    def store(self) -> Store:
        assert self._store is not None, "store used before it was opened"
        return self._store

    async def start(self) -> None:
        self._store = await Store.open(self.url, self.host, self.bus)
        self._name = HostName(self._store, self.host)
        try:
            await self._name.take()  # before anything takes back "its own" leases
        except BaseException:
            await self._store.close()
            raise
        self._tasks.spawn("host-name", self._name.keep(self.name_lost))
        if self._store.dialect == "postgresql":  # hosts that share a database share its clock
            self._tasks.spawn("database-clock", self._store.follow_clock_for_ever())
        if not self.delivers_outbox:
            self._tasks.spawn("outbox-discard", self._store.discard_outbox_for_ever())
        limits = self.settings
        retention = Retention(self._store, limits.raw_max_age_days, limits.jobs_max_age_days)
        if retention.enabled:
            self.retention = retention
            self._tasks.spawn("retention", retention.for_ever(limits.retention_interval_s))

    async def stop(self, grace: float) -> None:
        await self._tasks.cancel_all()
        await self._name.release()
        await self.store.close()


class Daemon:
    """One labd host: owns the event bus, the metrics and every component."""

    def __init__(self, loaded: LoadedConfig) -> None:
        self.loaded = loaded
        settings = loaded.settings
        self.bus = EventBus(settings.events.queue_size)
        self.metrics = DaemonMetrics(self.bus, settings.daemon.lab, settings.daemon.host_name)
        self.side_port = SidePort(
            settings.http, self.metrics.render, state_dir_id(settings.daemon.state_path)
        )
        self.notifier = SystemdNotifier()
        self.tasks = TaskSet("daemon")
        self._stop_reason: asyncio.Future[str] | None = None
        self._exit_code = EXIT_OK  # EXIT_RUNTIME when a fault, not a signal, stopped it
        self._bridge: MqttBridge | None = None
        self._state_lock: int | None = None  # labd.pid, held while this daemon runs
        # Plugins are loaded before anything starts, so a bad [drivers] section stops us early.
        source = loaded.path.name if loaded.path else "defaults"
        host = settings.daemon.host_name
        self.drivers = load_drivers(settings.drivers, host, source)
        for driver in self.drivers.values():
            driver.state_dir = settings.daemon.state_path
        self.power = load_power(settings.pool.power, source)
        self.metrics.follow_plugins(self.drivers, self.power)
        self.policy = _policy(settings, source)
        self.audit = Audit(self.bus)
        self.limiter = RateLimiter()
        self.health = ComponentHealth(self.bus, self.metrics.registry)
        self.side_port.add_probe("components", self.health.probe)
        self.local_credentials: Credentials | None = None
        self.principals = Principals([])

    @property
    def settings(self) -> Settings:
        return self.loaded.settings

    def request_stop(self, reason: str) -> None:
        """Ask the daemon to stop (idempotent); `run` then shuts down gracefully."""
        if self._stop_reason is not None and not self._stop_reason.done():
            self._stop_reason.set_result(reason)

    async def run(self) -> int:
        """Start everything, serve until asked to stop, stop everything. Returns the exit code."""
        loop = asyncio.get_running_loop()
        self._stop_reason = loop.create_future()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop, sig.name)
        loop.add_signal_handler(signal.SIGHUP, self._on_sighup)
        before, limit = raise_open_files_limit()  # systemd's soft 1024 is for select() users
        log.info("open files limit", soft=limit, soft_at_start=before)
        host = self.settings.daemon.host_name
        started: list[Component] = []
        try:
            try:
                async for component in self._components():
                    await component.start()
                    started.append(component)
                    log.debug("component started", component=component.name)
            except Exception as e:
                if full := await asyncio.to_thread(self._disk_full, e):
                    raise LabdError(full) from e
                raise
            self.tasks.spawn("loop-lag", monitor_loop_lag(self.metrics.loop_lag.observe))
            if self.notifier.watchdog_interval:
                self.tasks.spawn("watchdog", self._watchdog(self.notifier.watchdog_interval))
            self.bus.publish(DaemonStarted(host=host, version=__version__))
            self.notifier.ready("serving")
            log.info("labd started", version=__version__, host=host, lab=self.settings.daemon.lab)
            reason = await self._stop_reason
            # First no new work anywhere, then the components stop one by one.
            for component in started:
                if isinstance(component, TakesWork):
                    component.stop_taking_work()
            grace = self.settings.daemon.shutdown_grace
            log.info("labd stopping", reason=reason, grace_s=grace)
            self.bus.publish(DaemonStopping(host=host, reason=reason))
            self.notifier.stopping(f"stopping ({reason})")
        finally:
            await self._stop_all(started)
            self.side_port.release_ports()  # taken, and never served: a start that failed
            if self._state_lock is not None:
                os.close(self._state_lock)
                self._state_lock = None
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                loop.remove_signal_handler(sig)
            self.notifier.close()
        log.info("labd stopped")
        return self._exit_code

    async def _components(self) -> AsyncIterator[Component]:
        """The components in start order; each is built once the ones before it run."""
        settings = self.settings
        state_dir = settings.daemon.state_path
        await asyncio.to_thread(prepare_state_dir, state_dir, not settings.store.url)
        self._state_lock = await asyncio.to_thread(lock_state_dir, state_dir)
        if settings.http.enabled:  # before the broker hears of this host: see take_ports
            self.side_port.take_ports(api=True)
        host = settings.daemon.host_name
        if settings.auth.local_credentials:
            self.local_credentials = await asyncio.to_thread(ensure_local_credentials, state_dir)
        local = (
            self.local_credentials.as_local_principal(settings.auth.local_submits_per_minute)
            if self.local_credentials
            else None
        )
        self.principals = Principals.from_settings(settings.auth, local)
        yield self.health
        yield AccessMetrics(self.bus, self.metrics.registry)
        url = settings.store.url or default_sqlite_url(state_dir)
        store = StoreComponent(
            url, host, self.bus, self._name_lost, settings.mqtt.enabled, settings.store
        )
        yield store
        self.metrics.follow_clock(lambda: store.store.clock.offset)
        self.metrics.registry.register(
            RetentionCollector(lambda: store.retention.tally if store.retention else None)
        )
        self.pool = Pool(self.drivers, self.power, store.store, self.bus, settings.pool, host)
        yield self.pool
        self.jobs = JobService(
            store.store,
            self.drivers,
            self.bus,
            replay=with_archive_dir(settings.replay, state_dir),
            measurement=settings.measurement,
            perfherder=settings.perfherder,
            policy=self.policy,
            limiter=self.limiter,
            queue_timeout_s=settings.scheduler.queue_timeout_s,
        )
        self.scheduler = Scheduler(
            store.store,
            self.pool,
            self.jobs,
            self.bus,
            settings.scheduler,
            host,
            state_dir / "jobs",
        )
        self.metrics.registry.register(self.scheduler.space)
        # Subscribed before the scheduler starts (started later, its events wait for it): the
        # jobs a restarted host takes back at once are leased before the broker is up.
        lab_metrics = LabMetrics(
            self.metrics.registry,
            self.bus,
            store.store,
            self.pool,
            settings.metrics,
            lambda: self._bridge is not None and self._bridge.connected,
        )
        yield self.scheduler
        yield BaselineAnalyst(store.store, self.bus)
        keeper = ArtefactKeeper(state_dir, settings.artefacts, store.store, self.bus)
        self.metrics.registry.register(
            ArtefactCollector(lambda: keeper.usage, lambda: keeper.settings.suites)
        )
        yield keeper
        if settings.mqtt.enabled:
            async for component in self._mqtt(store.store, lambda job: keeper.links(job, host)):
                yield component
        yield lab_metrics
        if settings.http.enabled:
            from labd.daemon.api import Api, api_application
            from labd.daemon.heavy import HeavyQueries
            from labd.daemon.listeners import api_socket_path

            heavy = HeavyQueries(settings.http.heavy_queries, settings.http.heavy_queue)
            from labd.daemon.artefact_routes import ArtefactRoutes

            routes = ArtefactRoutes(
                store.store, keeper, host, self.audit, settings.artefacts.base_url, heavy
            )
            api = Api(store.store, self.jobs, self.scheduler, self.pool, self.audit, heavy, routes)
            self.side_port.add_api(
                api_application(api, self.principals, settings.http), api_socket_path(settings)
            )
            if settings.http.console:
                from labd.console import PREFIX, console_application

                console = console_application(
                    api, self.bus, self.principals, self.audit, settings.http, state_dir / "jobs"
                )
                self.side_port.add_console(console, PREFIX)
            self.side_port.add_probe("store", store.store.ping)
            yield self.side_port

    async def _mqtt(self, store: Store, artefact_links: ArtefactLinks) -> AsyncIterator[Component]:
        """The embedded broker when none is configured or listening, then the bridge."""
        settings, lab = self.settings.mqtt, self.settings.daemon.lab
        mqtt5 = True
        host = self.settings.daemon.host_name
        topics = Topics(settings.prefix or f"labd/v1/{lab}")
        credentials = None
        # Nobody may guess labd's client id: a broker gives a connection with the same id the
        # session (the embedded one even before it checks the password).
        state_dir = self.settings.daemon.state_path
        client_id = settings.client_id or await asyncio.to_thread(
            default_client_id, lab, host, state_dir
        )
        if settings.url:
            parts = urlsplit(settings.url)
            address = (
                parts.hostname or "localhost",
                parts.port or (8883 if parts.scheme == "mqtts" else 1883),
            )
        else:
            address = (settings.embedded_host, settings.embedded_port)
            if not await asyncio.to_thread(listening, *address):
                accounts = Accounts(
                    topics.prefix, self.principals, self.local_credentials, f"labd-{host}"
                )
                yield EmbeddedBroker(*address, accounts)
                credentials = (accounts.daemon_user, accounts.daemon_password)
                # It keeps nothing across labd's restarts: a new id at every start.
                client_id = settings.client_id or f"labd-{lab}-{host}-{secrets.token_hex(8)}"
                mqtt5 = False  # amqtt speaks 3.1.1 only (and hangs on a v5 CONNECT with a will)
        inbound = Inbound(
            settings,
            self.settings.auth,
            topics,
            self.principals,
            self.jobs,
            self.scheduler,
            self.pool,
            self.audit,
        )
        bridge = MqttBridge(
            settings,
            address,
            topics,
            host,
            client_id,
            store,
            inbound,
            self.pool,
            self.bus,
            mqtt5=mqtt5,
            credentials=credentials,
            artefact_links=artefact_links,
            down=self.health.down,
        )
        self.side_port.add_probe("broker", bridge.probe)
        self._bridge = bridge
        yield bridge

    async def _stop_all(self, started: list[Component]) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.daemon.shutdown_grace
        for component in reversed(started):
            grace = max(0.0, deadline - loop.time())
            try:
                async with asyncio.timeout(grace + STOP_SLACK):
                    await component.stop(grace)
            except Exception:
                log.exception("component failed to stop cleanly", component=component.name)
        await self.tasks.cancel_all()

    async def _watchdog(self, interval: float) -> None:
        # Pinging from the loop itself means a blocked loop stops the pings: that is the point.
        while True:
            self.notifier.watchdog()
            await asyncio.sleep(interval)

    def _name_lost(self, why: str) -> None:
        """Another daemon took this host's name while the database was away: two daemons
        under one name take each other's leases, so this one stops."""
        log.error("another labd took this host's name; stopping", error=why)
        self._exit_code = EXIT_RUNTIME  # a failed unit: systemd restarts it, to retry the name
        self.request_stop("host name taken")

    def _disk_full(self, error: Exception) -> str:
        """Why labd cannot start, when its state directory's disk is full ("" otherwise):
        a restart loop under systemd, each start saying "unexpected error" or "disk I/O error"."""
        state_dir = self.settings.daemon.state_path
        least = self.settings.scheduler.min_free_mb
        try:
            free = free_bytes(state_dir)
        except OSError:
            return ""
        # SQLite on a full disk may say only "disk I/O error" (its shared-memory file).
        io_error = any(isinstance(cause, sqlite3.Error) for cause in causes(error))
        if not out_of_space(error) and not (io_error and free < 2**20):
            return ""
        return (
            f"cannot start: the state directory's disk is full ({free / 2**20:.0f} MiB free at "
            f"{state_dir}; scheduler.min_free_mb is {least}): free some space and start labd "
            f"again ({type(error).__name__}: {error})"
        )

    def _on_sighup(self) -> None:
        self.tasks.spawn("reload", self.reload())

    async def reload(self) -> None:
        """Re-read the configuration file; apply safe changes, keep the old one if invalid."""
        try:
            new = await asyncio.to_thread(load_config, self.loaded.path)
            # What a restart would refuse is refused now, not found at the next reboot.
            source = new.path.name if new.path else "defaults"
            if problems := await asyncio.to_thread(run_refusals, new.settings, source):
                raise ConfigError(problems)
        except ConfigError as e:
            log.error("configuration reload rejected; keeping the old one", problems=e.problems)
            self.bus.publish(ConfigRejected(problems=e.problems))
            return
        changed = _changed_keys(self.settings.model_dump(), new.settings.model_dump())
        applied = sorted(k for k in changed if k in RELOADABLE)
        pending = sorted(k for k in changed if k not in RELOADABLE)
        if "log.level" in applied:
            set_level(new.settings.log.level)
        self.loaded = LoadedConfig(_with_keys(self.settings, new.settings, applied), new.path)
        log.info("configuration reloaded", applied=applied, pending_restart=pending)
        self.bus.publish(ConfigReloaded(applied=applied, pending_restart=pending))


def _policy(settings: Settings, source: str) -> Policy:
    """The job policy of this host, its programs resolved now (ConfigError when unusable)."""
    p = settings.policy
    policy = p.host_policy(source)
    if policy.run_as is None and settings.auth.principals:
        log.warning(
            "jobs run as labd's own account: a job can read its state directory (credentials "
            "included) and use its API as the local admin; run labd as root (as the systemd "
            "unit does) so that jobs run as policy.run_as",
            uid=os.geteuid(),
            principals=sorted(settings.auth.principals),
        )
    if policy.missing:
        log.warning(
            "policy.programs lists programs this host does not have",
            missing=list(policy.missing),
            path=p.path,
        )
    return policy


def _changed_keys(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[str]:
    changed = []
    for key in old.keys() | new.keys():
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            changed += _changed_keys(a, b, f"{prefix}{key}.")
        elif a != b:
            changed.append(f"{prefix}{key}")
    return changed


def _with_keys(running: Settings, new: Settings, keys: list[str]) -> Settings:
    """The running settings with only `keys` ("section.key") taken from the new ones."""
    for key in keys:
        section, name = key.split(".")
        updated = getattr(running, section).model_copy(
            update={name: getattr(getattr(new, section), name)}
        )
        running = running.model_copy(update={section: updated})
    return running
