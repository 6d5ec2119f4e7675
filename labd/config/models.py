"""The configuration schema: one pydantic model per section, every field described and bounded.

`config.example.toml` is rendered from these models (`labd config example`), and a test fails
when the committed file drifts from them.
"""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from labd.config.artefacts import ArtefactSettings
from labd.model import ID_PATTERN, OPTIONAL_ID_PATTERN, id_problem

LOCAL_PRINCIPAL = "local"


class Section(BaseModel):
    """Base of every section: unknown keys are errors, values are checked on assignment."""

    model_config = ConfigDict(extra="forbid", frozen=True)


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


class StoreSettings(Section):
    """Where jobs, devices and raw results are kept."""

    url: str = Field(
        "",
        description=(
            "SQLAlchemy URL; empty means SQLite in the state directory. Several hosts share "
            "PostgreSQL: postgresql+asyncpg://user:password@host/labd"
        ),
    )


class PoolSettings(Section):
    """The device pool: discovery, health checks, quarantine, power cycling."""

    discovery_interval_s: float = Field(
        10, gt=0, le=3600, description="How often drivers look for devices (hot-plug)."
    )
    health_interval_s: float = Field(
        30, gt=0, le=86400, description="How often each idle device's health is checked."
    )
    health_timeout_s: float = Field(20, gt=0, le=600, description="Time-out of one check.")
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
        5, gt=0, le=600, description="How often expired leases are looked for."
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


class ReplaySettings(Section):
    """Replay servers the runner starts for jobs that name a network archive."""

    archive_dir: str = Field(
        "",
        description=(
            "Directory job archives are read from (relative names resolve here; nothing "
            "outside it is served). Empty: the daemon's working directory."
        ),
    )
    ca_dir: str = Field(
        "", description="The replay CA (labd replay ca DIR) for HTTPS; empty: HTTP only."
    )
    bind: str = Field(
        "127.0.0.1",
        description="Address replay servers listen on; a lab network address for devices "
        "that reach it over the network instead of adb reverse.",
    )
    max_archive_mb: float = Field(
        256, gt=0, description="Larger archives are refused (loading costs about twice the size)."
    )


class MeasurementSettings(Section):
    """Each iteration's conditions, and values labd cannot trust (see docs/metrics.md)."""

    set_aside_flagged: bool = Field(
        True,
        description="Keep flagged iterations out of summaries, comparisons and alerts (they "
        "stay in the raw results with their reasons); false: count them, flagged.",
    )
    retry_flagged: int = Field(
        0,
        ge=0,
        le=1000,
        description="Extra iterations a job may run in place of measured ones set aside.",
    )
    flag_thermal_throttling: bool = Field(
        True,
        description="Flag an iteration during which the CPUs' thermal-throttle counters rose "
        "(host) or the thermal status was above max_thermal_status (Android).",
    )
    max_thermal_status: int = Field(
        1, ge=0, le=6, description="Android thermal status above this (1 = light) is throttling."
    )
    max_load_per_cpu: float = Field(
        0,
        ge=0,
        le=1000,
        description="Flag an iteration when the 1-minute load average before it, per CPU, was "
        "above this (other work competed for the CPUs); 0: do not judge the load.",
    )
    max_temperature_c: float = Field(
        0,
        ge=0,
        le=200,
        description="Flag an iteration when the hottest thermal zone (host) was above this, "
        "before or after it; 0: do not judge it.",
    )
    max_battery_temp_c: float = Field(
        0,
        ge=0,
        le=100,
        description="Flag an iteration when the battery (Android) was hotter than this before "
        "or after it; 0: do not judge it.",
    )


class PerfherderSettings(Section):
    """The `PERFHERDER_DATA:` export Mozilla's Treeherder ingests."""

    framework: str = Field(
        "labd",
        min_length=1,
        max_length=100,
        description="The Perfherder framework the series belong to (Treeherder must know it).",
    )
    # Treeherder's own list (its performance-artifact schema refuses any other name).
    application: Literal[
        "",
        "firefox",
        "chrome",
        "chrome-m",
        "fennec",
        "geckoview",
        "refbrow",
        "fenix",
        "focus",
        "safari",
        "safari-tp",
        "custom-car",
        "cstm-car-m",
    ] = Field("", description="Application under test (Treeherder's name); empty: none.")
    extra_options: list[str] = Field(
        default_factory=list,
        max_length=6,
        description="Options added to every suite's extraOptions (they name the series: never "
        "anything that changes per revision).",
    )


class PrincipalSettings(Section):
    """One principal the lab admits: a CI system, a person, a dashboard."""

    role: Literal["viewer", "submitter", "admin"] = Field(
        description=(
            "viewer: read results and state; submitter: also submit jobs and cancel its own; "
            "admin: also every job and the devices."
        )
    )
    secret_keys: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "HMAC-SHA256 keys that sign its MQTT messages, by key id (base64url, 32 bytes; "
            "`labd auth add` makes one). Several while a key is rotated."
        ),
    )
    token_sha256: list[str] = Field(
        default_factory=list,
        description="SHA-256 (hex) of the bearer tokens it may use on the HTTP API.",
    )
    broker_password_hash: str = Field(
        "",
        description=(
            "Its MQTT broker password, hashed as Mosquitto's passwd file does ($7$ PBKDF2); "
            "`labd auth mosquitto` writes it to the broker's files."
        ),
    )
    unix_users: list[str] = Field(
        default_factory=list,
        description="Local accounts that act as this principal on the API's Unix socket.",
    )
    scenarios: list[str] = Field(
        default_factory=list,
        description="Scenarios it may submit; empty: every scenario the policy allows.",
    )
    submits_per_minute: int = Field(
        120, ge=1, le=100_000, description="Submissions accepted per minute."
    )
    max_active_jobs: int = Field(
        1000, ge=1, le=1_000_000, description="Its jobs queued or running at once."
    )

    @model_validator(mode="after")
    def _keys_are_keys(self) -> PrincipalSettings:
        for key_id, secret in self.secret_keys.items():
            if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", key_id):
                raise ValueError(f"secret_keys: key id {key_id!r} is not [A-Za-z0-9_.-]{{1,64}}")
            if len(secret) < 32:
                raise ValueError(f"secret_keys.{key_id}: shorter than 32 characters")
        for digest in self.token_sha256:
            if not re.fullmatch(r"[0-9a-f]{64}", digest):
                raise ValueError("token_sha256: each entry is 64 lowercase hex digits")
        return self


class AuthSettings(Section):
    """Who may use the lab: principals, their roles and credentials."""

    principals: dict[str, PrincipalSettings] = Field(
        default_factory=dict,
        description=(
            "Principals by name ([auth.principals.<name>] tables; `labd auth add NAME --role "
            "R` prints one). The local account running labd is always admin (`local`)."
        ),
    )
    max_age_s: float = Field(
        900,
        ge=10,
        le=7 * 86400,
        description=(
            "Signed MQTT messages older than this are refused as expired (requests a broker "
            "kept while labd was away are handled if they are younger)."
        ),
    )
    clock_skew_s: float = Field(
        60, ge=0, le=3600, description="How far in the future a message's time may be."
    )
    local_submits_per_minute: int = Field(
        600,
        ge=1,
        le=1_000_000,
        description="The local admin's submissions per minute (its scripts submit in batches).",
    )
    local_credentials: bool = Field(
        True,
        description=(
            "Create the local admin's credentials in the state directory on first start "
            "(readable by labd's user only), for the `labd` command on this machine."
        ),
    )

    @model_validator(mode="after")
    def _names_are_ids(self) -> AuthSettings:
        for name in self.principals:
            if problem := id_problem(name, "principal name"):
                raise ValueError(problem)
            if name == LOCAL_PRINCIPAL:
                raise ValueError(f"principal name {name!r} is reserved for the local admin")
        return self


class PolicySettings(Section):
    """What jobs may run on this host: the admin's policy."""

    programs: list[str] = Field(
        default_factory=lambda: ["python3"],
        description=(
            "Programs the command scenario may run: names resolved against `path` when labd "
            "starts, or absolute paths. A shell (sh, bash ...) runs only when listed by name. "
            "An interpreter listed here runs any code a job passes it: list what the lab needs."
        ),
    )
    path: str = Field(
        "/usr/local/bin:/usr/bin:/bin",
        description="Where programs are looked up (the submitter's PATH is never used).",
    )
    env_keys: list[str] = Field(
        default_factory=list,
        description=(
            "Environment variables a job may set (fnmatch patterns, e.g. MOZ_*). Loader and "
            "search-path variables (LD_*, PATH, PYTHONPATH ...) need an exact entry."
        ),
    )
    run_as: str = Field(
        "nobody",
        description=(
            "When labd runs as root: the unprivileged user measured programs and browsers "
            "run as. Never root."
        ),
    )

    @model_validator(mode="after")
    def _not_root(self) -> PolicySettings:
        if self.run_as in ("root", "0"):
            raise ValueError("run_as: measured programs never run as root")
        return self


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
