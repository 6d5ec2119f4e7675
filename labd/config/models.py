"""The configuration schema: one pydantic model per section, every field described and bounded.

`config.example.toml` is rendered from these models (`labd config example`), and a test fails
when the committed file drifts from them.
"""

from __future__ import annotations

import importlib.util
import os
import re
import socket
import stat
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from labd.config.access import AuthSettings, PolicySettings
from labd.config.artefacts import ArtefactSettings
from labd.config.measurement import MeasurementSettings, PerfherderSettings, ReplaySettings
from labd.config.section import Section
from labd.model import ID_PATTERN, OPTIONAL_ID_PATTERN, id_problem


class DaemonSettings(Section):
    """Identity of this labd host and its lifecycle."""

    lab: str = Field(
        "default",
        pattern=ID_PATTERN,
        description="Name of the lab; several hosts of one lab share it (MQTT topics, labels).",
    )
    host: str = Field(
        "",
        pattern=OPTIONAL_ID_PATTERN,
        description="Name of this host in the lab; empty means the machine's hostname.",
    )
    state_dir: str = Field(
        "",
        description=(
            "Directory for the database and artifacts; empty means $STATE_DIRECTORY (systemd), "
            "else /var/lib/labd for root, else ~/.local/state/labd."
        ),
    )
    shutdown_grace: float = Field(
        30.0,
        ge=0,
        le=3600,
        description="Seconds running work may take to finish after SIGTERM before it is stopped.",
    )

    @field_validator("state_dir")
    @classmethod
    def _a_directory_may_be_there(cls, value: str) -> str:
        # A file where the directory would be passed the check and failed `labd run` with a
        # traceback; whether a directory may be created there is only known at start.
        if value and (problem := not_a_directory_problem(Path(value).expanduser())):
            raise ValueError(problem)
        return value

    @property
    def host_name(self) -> str:
        if self.host:
            return self.host
        # A hostname is almost always a valid name already; make sure it is one.
        name = re.sub(r"[^A-Za-z0-9_.@:-]", "-", socket.gethostname())[:128]
        return name if id_problem(name) is None else f"_{name[:127]}"

    @property
    def state_path(self) -> Path:
        if self.state_dir:
            return Path(self.state_dir).expanduser()
        if systemd_dir := os.environ.get("STATE_DIRECTORY"):
            return Path(systemd_dir.split(":")[0])
        if os.geteuid() == 0:
            return Path("/var/lib/labd")
        xdg = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
        return Path(xdg) / "labd"


def not_a_directory_problem(path: Path) -> str | None:
    """Why `path` can never be a directory (it, or a folder above it, is something else), or
    None. Whether it may be created is only known by trying, at start."""
    for candidate in (path, *path.parents):
        try:
            info = candidate.stat()
        except (FileNotFoundError, NotADirectoryError):
            continue  # the folder above says why
        except OSError:  # not ours to look into: the start says what it finds
            return None
        if stat.S_ISDIR(info.st_mode):
            return None
        return f"{candidate} is not a directory"
    return None


def not_a_file_problem(path: Path) -> str | None:
    """Why `path` is no file for anyone (missing, or a folder, a device...), links followed;
    else None. Whether labd's account may read it is not judged: every `labd` command loads
    this configuration, as whichever account runs it, and a key readable by labd's account
    only is right."""
    try:
        info = path.stat()
    except (FileNotFoundError, NotADirectoryError) as e:
        return f"{path}: {e.strerror}"
    except OSError:  # e.g. in a folder this account may not search: not ours to judge
        return None
    if not stat.S_ISREG(info.st_mode):
        return f"{path} is not a regular file"
    return None


class LogSettings(Section):
    """Structured logging."""

    level: Literal["debug", "info", "warning", "error"] = Field(
        "info", description="Lowest level written; can be changed by SIGHUP."
    )
    format: Literal["auto", "json", "console"] = Field(
        "auto",
        description="auto: JSON lines unless stderr is a terminal; json; console (coloured).",
    )


class HttpSettings(Section):
    """The side port (/healthz, /readyz, /metrics: open); the API (own listeners, credentials)."""

    enabled: bool = Field(True, description="Serve the side port and the API at all.")
    host: str = Field(
        "127.0.0.1",
        description=(
            "Address of the side port (/healthz, /readyz, /metrics only: point Prometheus "
            "here; the API never listens on it). Loopback keeps it private to this host."
        ),
    )
    port: int = Field(9471, ge=0, le=65535, description="Side port; 0 picks a free one.")
    api_host: str = Field(
        "127.0.0.1",
        description=(
            "Address of the API for bearer-token clients (`labd --api-url`); empty: no TCP "
            "API, the Unix socket only. Tokens travel in clear: off this host, put TLS in front."
        ),
    )
    api_port: int = Field(9472, ge=0, le=65535, description="API port; 0 picks a free one.")
    api_socket: str = Field(
        "",
        description=(
            "The API's Unix socket (the local `labd` command's way in: the peer's account is "
            "its credential); empty: api.sock in the state directory."
        ),
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description=(
            "Host names API requests may name in their Host header, besides the addresses "
            "labd listens on, localhost, 127.0.0.1, [::1] and this machine's name (a guard "
            "against DNS rebinding): e.g. the name remote clients use in --api-url."
        ),
    )
    console: bool = Field(
        True,
        description=(
            "Serve the web console at /console on the side port (sign-in with a principal's "
            "API token; viewers read, admins act). Off the loopback, put TLS in front."
        ),
    )
    heavy_queries: int = Field(
        2,
        ge=1,
        le=64,
        description="Results and history queries computed at once; more wait their turn.",
    )
    heavy_queue: int = Field(
        32,
        ge=0,
        le=10_000,
        description="Queries that may wait for a turn; more are answered 503 with Retry-After.",
    )
    header_timeout_s: float = Field(
        30,
        gt=0,
        le=3600,
        description=(
            "Seconds a client has to send a request's headers, from connecting or from the "
            "answer before (an idle kept-alive connection is closed after as long too)."
        ),
    )
    max_connections: int = Field(
        256,
        ge=1,
        le=100_000,
        description=(
            "Connections each HTTP listener (side port, API port, API socket) holds open at "
            "once; more wait in the listen queue. Never more than half the file descriptor "
            "limit shared among the listeners: the rest is for jobs, database and devices."
        ),
    )

    @model_validator(mode="after")
    def _api_apart_from_metrics(self) -> HttpSettings:
        if self.api_host and self.api_port == self.port != 0:
            raise ValueError(
                "api_port must differ from port: the API and /metrics listen apart, so "
                "exposing /metrics never exposes the API"
            )
        return self


class EventSettings(Section):
    """The in-process event bus."""

    queue_size: int = Field(
        10_000,
        ge=1,
        le=10_000_000,
        description="Events each subscriber may fall behind before the oldest are dropped.",
    )


STORE_SCHEMES = ("sqlite+aiosqlite", "postgresql+asyncpg")


class StoreSettings(Section):
    """Where jobs, devices and raw results are kept."""

    url: str = Field(
        "",
        description=(
            "SQLAlchemy URL; empty means SQLite in the state directory. Several hosts share "
            "PostgreSQL: postgresql+asyncpg://user:password@host/labd"
        ),
    )

    raw_max_age_days: float = Field(
        365,
        ge=0,
        le=36500,
        description="An ended job's raw iterations are removed this many days after it ended; "
        "its summary and its point of the test's history stay (0: kept forever).",
    )
    jobs_max_age_days: float = Field(
        0,
        ge=0,
        le=36500,
        description="An ended job is removed whole, summary and history point too, this many "
        "days after it ended (0: kept forever).",
    )
    retention_interval_s: float = Field(
        3600, ge=1, le=7 * 86400, description="How often the daemon applies these limits."
    )

    @field_validator("url")
    @classmethod
    def _supported(cls, value: str) -> str:
        scheme = value.split("://", 1)[0] if "://" in value else ""
        if value and scheme not in STORE_SCHEMES:
            raise ValueError(
                f"labd keeps its data in SQLite or PostgreSQL: the URL must start with "
                f"{' or '.join(s + '://' for s in STORE_SCHEMES)}"
            )
        if scheme == "postgresql+asyncpg" and importlib.util.find_spec("asyncpg") is None:
            raise ValueError("PostgreSQL needs asyncpg: pip install 'labd[postgres]'")
        return value


class PoolSettings(Section):
    """The device pool: discovery, health checks, quarantine, power cycling."""

    discovery_interval_s: float = Field(
        10, gt=0, le=3600, description="How often drivers look for devices (hot-plug)."
    )
    health_interval_s: float = Field(
        30, gt=0, le=86400, description="How often each idle device's health is checked."
    )
    health_timeout_s: float = Field(
        20, gt=0, le=600, description="Time-out of one health check, and of one discovery."
    )
    quarantine_after: int = Field(
        3, ge=1, le=100, description="Consecutive infrastructure failures before quarantine."
    )
    power_cycle_after: int = Field(
        2, ge=1, le=100, description="Consecutive failed health checks before a power cycle."
    )
    power_off_s: float = Field(5, ge=0, le=600, description="How long a power cycle stays off.")
    power: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description=(
            'Power control per device id: { kind = "serial-relay", ...the kind\'s options }.'
        ),
    )


class SchedulerSettings(Section):
    """Queue, leases, retries."""

    lease_ttl_s: float = Field(
        30, ge=1, le=3600, description="A lease not renewed for this long is taken back."
    )
    heartbeat_s: float = Field(10, gt=0, le=1800, description="How often a lease is renewed.")
    retry_backoff_s: float = Field(
        10, ge=0, le=3600, description="First retry delay after an infrastructure failure."
    )
    retry_backoff_max_s: float = Field(600, ge=0, le=86400, description="Longest retry delay.")
    reap_interval_s: float = Field(
        5, gt=0, le=600, description="How often expired leases and queue deadlines are looked for."
    )
    queue_timeout_s: float = Field(
        86400,
        gt=0,
        le=30 * 24 * 3600,
        description=(
            "A job still waiting for a device this long after its submission times out, saying "
            "what it waited for (a job's own queue_timeout_s overrides it)."
        ),
    )
    min_free_mb: int = Field(
        100,
        ge=0,
        le=2**30,
        description=(
            "No new job is leased while the state directory has less free space than this "
            "(MiB; 0: never pause); running jobs go on, leasing resumes once space is freed."
        ),
    )

    @model_validator(mode="after")
    def _heartbeat_within_lease(self) -> SchedulerSettings:
        if self.heartbeat_s * 2 > self.lease_ttl_s:
            raise ValueError("heartbeat_s must be at most half of lease_ttl_s")
        return self


class MqttSettings(Section):
    """The MQTT interface: CI submits and follows jobs; labd publishes events and state."""

    enabled: bool = Field(True, description="Bridge the daemon to an MQTT broker.")
    url: str = Field(
        "",
        pattern=r"^$|^mqtts?://[^/\s]+$",
        description=(
            "Broker, e.g. mqtt://broker.lab:1883 or mqtts://broker.lab:8883. Empty: use what "
            "listens on embedded_host:embedded_port, or start an embedded broker there."
        ),
    )
    embedded_host: str = Field("127.0.0.1", description="Where the embedded broker listens.")
    embedded_port: int = Field(1883, ge=1, le=65535, description="Port of the embedded broker.")
    prefix: str = Field(
        "", description="Topic prefix; empty means labd/v1/<lab>.", pattern=r"^[^#+\s]*$"
    )
    client_id: str = Field(
        "",
        description=(
            "MQTT client id; empty means labd-<lab>-<host>-<random, kept in the state "
            "directory> (a new one at each start on the embedded broker): a broker hands a "
            "session to whoever connects with its id, so it must not be guessable."
        ),
    )
    username: str = Field("", description="Username for the broker; empty: anonymous.")
    password: str = Field("", description="Password for the broker.")
    tls_ca: str = Field("", description="CA certificate file to verify the broker (mqtts).")
    tls_cert: str = Field("", description="Client certificate file, for mutual TLS.")
    tls_key: str = Field("", description="Client key file, for mutual TLS.")
    max_payload_bytes: int = Field(
        262_144, ge=1024, le=16 * 2**20, description="Larger incoming payloads are refused."
    )
    keepalive_s: int = Field(30, ge=5, le=3600, description="MQTT keep-alive.")
    session_expiry_s: int = Field(
        86_400,
        ge=0,
        le=2**32 - 1,
        description=(
            "How long the broker keeps labd's session (subscriptions and QoS 1 requests "
            "published meanwhile) while labd is away (MQTT 5; 3.1.1 brokers keep it by "
            "their own settings)."
        ),
    )
    reconnect_max_s: float = Field(
        30, ge=1, le=3600, description="Longest wait between reconnection attempts."
    )
    ended_state_expiry_h: float = Field(
        24,
        ge=0,
        le=(2**32 - 1) / 3600,
        description=(
            "How long the broker keeps a job's retained state once the job has ended (MQTT 5 "
            "message expiry; 0: for ever). Kept for ever, every job left one retained message: "
            "600,000 a month in a busy lab, sent to every new subscriber of labd/#."
        ),
    )

    @field_validator("tls_ca", "tls_cert", "tls_key")
    @classmethod
    def _a_readable_file(cls, value: str) -> str:
        # ssl reports a missing file as a bare "No such file or directory", at every
        # reconnection, naming neither the file nor the key: refused here, naming both.
        if value and (problem := not_a_file_problem(Path(value))):  # as ssl opens it
            raise ValueError(problem)
        return value


class MetricsSettings(Section):
    """The Prometheus exporter on the side port's /metrics."""

    snapshot_interval_s: float = Field(
        5, gt=0, le=3600, description="How often jobs, devices and the outbox are counted."
    )
    result_series: list[str] = Field(
        default_factory=list,
        description=(
            'suite/test patterns (fnmatch, e.g. "browser/*") whose latest result per metric '
            "and device class is exported as a gauge; empty exports none (bounded labels)."
        ),
    )
    max_result_series: int = Field(
        500,
        ge=0,
        le=100_000,
        description=(
            "Most labd_latest_result series exported (0: none): a pattern with a wildcard lets "
            "whoever submits name new tests and metrics; past this, new ones are not exported."
        ),
    )


class Settings(Section):
    """The whole configuration of one labd host."""

    daemon: DaemonSettings = Field(default_factory=DaemonSettings, description="This host.")
    log: LogSettings = Field(default_factory=LogSettings, description="Logging.")
    http: HttpSettings = Field(default_factory=HttpSettings, description="HTTP side port and API.")
    events: EventSettings = Field(default_factory=EventSettings, description="Event bus.")
    store: StoreSettings = Field(default_factory=StoreSettings, description="Database.")
    pool: PoolSettings = Field(default_factory=PoolSettings, description="Device pool.")
    scheduler: SchedulerSettings = Field(
        default_factory=SchedulerSettings, description="Scheduler."
    )
    mqtt: MqttSettings = Field(default_factory=MqttSettings, description="MQTT.")
    metrics: MetricsSettings = Field(default_factory=MetricsSettings, description="Metrics.")
    replay: ReplaySettings = Field(default_factory=ReplaySettings, description="Replay servers.")
    measurement: MeasurementSettings = Field(
        default_factory=MeasurementSettings, description="Conditions and trust."
    )
    perfherder: PerfherderSettings = Field(
        default_factory=PerfherderSettings, description="Perfherder export."
    )
    auth: AuthSettings = Field(default_factory=AuthSettings, description="Principals.")
    policy: PolicySettings = Field(default_factory=PolicySettings, description="Job policy.")
    artefacts: ArtefactSettings = Field(
        default_factory=ArtefactSettings, description="Artefacts of jobs."
    )
    drivers: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Options per driver plugin, e.g. [drivers.host]; see each driver.",
    )
