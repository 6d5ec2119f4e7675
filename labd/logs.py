"""Structured logging: JSON lines for machines, colour for people, secrets never written.

structlog renders through the standard library's logging, so lines from aiohttp, aiomqtt and
SQLAlchemy come out in the same format, with the same context, as labd's own.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any

import structlog
import structlog.tracebacks

from labd.redact import MASK, is_secret_name, redact_text

_secrets: tuple[str, ...] = ()
_HANDLER_NAME = "labd"


def _redact(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for key, value in event.items():
        if is_secret_name(key) and value is not None:
            event[key] = MASK
        elif isinstance(value, str):
            event[key] = redact_text(value, _secrets)
    return event


def _masked(value: Any) -> Any:
    if isinstance(value, str):
        return redact_text(value, _secrets)
    if isinstance(value, list):
        return [_masked(item) for item in value]
    if isinstance(value, dict):
        return {key: _masked(item) for key, item in value.items()}
    return value


def _redact_exception(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """The rendered traceback, masked: an exception's message can quote a secret (a database
    URL with its password), and it is rendered after the other fields were masked."""
    if "exception" in event:
        event["exception"] = _masked(event["exception"])
    return event


def _shared_processors() -> list[Any]:
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True, key="timestamp"),
        _redact,
    ]


# sd-daemon(3) priority prefixes: journald files a line under its priority, so
# `journalctl -p err` finds labd's errors (without them every line is priority 6, info).
SYSLOG_PRIORITY = {
    logging.CRITICAL: 2,
    logging.ERROR: 3,
    logging.WARNING: 4,
    logging.INFO: 6,
    logging.DEBUG: 7,
}


def stderr_is_journal(environ: Mapping[str, str] | None = None) -> bool:
    """Whether stderr is connected to journald: systemd sets JOURNAL_STREAM to the device and
    inode of the stream it gave us; it must still be our stderr (not inherited past a
    redirection)."""
    import os

    value = (environ if environ is not None else os.environ).get("JOURNAL_STREAM", "")
    device, _, inode = value.partition(":")
    try:
        info = os.fstat(sys.stderr.fileno())
    except (OSError, ValueError):
        return False
    return (
        device.isdigit()
        and inode.isdigit()
        and (info.st_dev, info.st_ino)
        == (
            int(device),
            int(inode),
        )
    )


class JournalPriority(logging.Formatter):
    """Prefix each line with its `<N>` priority for journald."""

    def __init__(self, inner: logging.Formatter) -> None:
        super().__init__()
        self.inner = inner

    def format(self, record: logging.LogRecord) -> str:
        priority = SYSLOG_PRIORITY.get(record.levelno, 6)
        return f"<{priority}>" + self.inner.format(record)


class ClientErrorsQuiet(logging.Filter):
    """aiohttp's servers log a request they cannot parse (a request line or header too long,
    a malformed one) at error level with a traceback: anyone who can reach a port could fill
    `journalctl -p err`. Such a request is the client's fault: one warning line, no traceback.
    Anything else (a handler's exception, a 500) stays an error with its traceback. Bytes
    that are not HTTP at all (a scanner, TLS on the plain port) aiohttp logs at debug level,
    as noise on a reachable port: the same line then, at debug level. A flood of them is one
    line a minute: the first, then the next a minute on with how many were left out since.
    Warnings and debug noise are counted apart, so a scanner's noise never hides a warning."""

    REASON_LIMIT = 200  # the reason can quote the client's bytes (a bad request line)
    EVERY_S = 60.0

    def __init__(self) -> None:
        super().__init__()
        self._said_at: dict[bool, float] = {}  # by whether the line is a warning
        self._left_out: dict[bool, int] = {True: 0, False: 0}

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is None:
            return True
        from aiohttp.http_exceptions import BadHttpMessage  # imported by then: aiohttp logs

        if isinstance(exc, BadHttpMessage):
            now = time.monotonic()
            warning = record.levelno >= logging.WARNING
            said_at = self._said_at.get(warning)
            if said_at is not None and now - said_at < self.EVERY_S:
                self._left_out[warning] += 1
                return False
            self._said_at[warning] = now
            reason = f"{type(exc).__name__}: {exc.message}"
            if len(reason) > self.REASON_LIMIT:
                reason = reason[: self.REASON_LIMIT] + "..."
            remote = record.args[0] if isinstance(record.args, tuple) and record.args else None
            # One event to select on; who and why in fields (a Unix socket has no address).
            record.msg, record.args = "bad HTTP request refused", ()
            record.peer, record.reason = remote or "a Unix socket", reason
            record.left_out, self._left_out[warning] = self._left_out[warning], 0  # since then
            if warning:
                record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.exc_info, record.exc_text = None, None
        return True


class BrokerLossIsAWarning(logging.Filter):
    """paho (through aiomqtt's `mqtt` logger) logs a broker that went away (restarted,
    unplugged) at error level, beside labd's own `mqtt connection lost; reconnecting`
    warning: a broker restart paged whoever alerts on errors. Its socket failures are
    warnings; anything else it says at error stays an error."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.ERROR and str(record.msg).startswith("failed to receive"):
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


MQTT_CLIENT_LOGGER = "mqtt"  # aiomqtt's
AIOHTTP_SERVER_LOGGER = "aiohttp.server"
FOREIGN_FIELDS = ("peer", "reason", "left_out")  # what ClientErrorsQuiet adds to a record


def wants_json(fmt: str) -> bool:
    """JSON when asked for, or in "auto" mode when stderr is not a terminal."""
    return fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())


def configure_logging(level: str = "info", fmt: str = "auto", secrets: Iterable[str] = ()) -> None:
    """Route structlog and stdlib logging to stderr in the chosen format, masking `secrets`."""
    global _secrets
    _secrets = tuple(s for s in secrets if s)
    renderer: Any
    if wants_json(fmt):
        # No local variables in tracebacks: they could hold secrets.
        tracebacks = structlog.tracebacks.ExceptionDictTransformer(show_locals=False)
        renderer = [
            structlog.processors.ExceptionRenderer(tracebacks),
            _redact_exception,
            structlog.processors.JSONRenderer(),
        ]
    else:
        # Plain tracebacks: rich's, the default, show local variables (secrets again) and
        # took 3 s of CPU to render one SQLAlchemy error, blocking the event loop meanwhile.
        renderer = [
            structlog.processors.format_exc_info,
            _redact_exception,
            structlog.dev.ConsoleRenderer(
                colors=sys.stderr.isatty(), exception_formatter=structlog.dev.plain_traceback
            ),
        ]
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*_shared_processors(), structlog.stdlib.ExtraAdder(FOREIGN_FIELDS)],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *renderer],
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JournalPriority(formatter) if stderr_is_journal() else formatter)
    handler.set_name(_HANDLER_NAME)
    root = logging.getLogger()
    # Replace only our own handler: others (pytest's capture, an embedding app's) stay.
    root.handlers[:] = [h for h in root.handlers if h.get_name() != _HANDLER_NAME] + [handler]
    server = logging.getLogger(AIOHTTP_SERVER_LOGGER)
    for old in [f for f in server.filters if isinstance(f, ClientErrorsQuiet)]:
        server.removeFilter(old)  # a fresh one: its minute starts now
    server.addFilter(ClientErrorsQuiet())
    broker = logging.getLogger(MQTT_CLIENT_LOGGER)
    if not any(isinstance(f, BrokerLossIsAWarning) for f in broker.filters):
        broker.addFilter(BrokerLossIsAWarning())
    set_level(level)
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *_shared_processors(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )


def set_level(level: str) -> None:
    """Change the lowest level written (used by SIGHUP reloads)."""
    logging.getLogger().setLevel(level.upper())
    # Third-party libraries narrate their internals; only their warnings reach operators.
    for noisy in ("asyncio", "aiosqlite", "amqtt", "transitions"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLogger().level))


bind_context = structlog.contextvars.bound_contextvars
"""Context manager: every line logged inside it (in this task) carries the given keys."""
