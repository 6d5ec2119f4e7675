"""The embedded broker that lets a bare machine work: amqtt, in-process, on loopback.

amqtt is the maintained pure-Python broker that runs inside our event loop with no extra
process or binary. It speaks MQTT 3.1.1 only, so nothing labd answers depends on MQTT 5
there (the bridge falls back, and every answer also goes to a plain topic).

It is never anonymous: it admits labd's own account (a password made at each start), the
local admin (credentials in the state directory) and every principal with a broker password,
each limited to its topics by the same rules `labd auth mosquitto` writes for Mosquitto.
"""

from __future__ import annotations

import secrets
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog
from amqtt.contexts import Action
from amqtt.plugins.base import BaseAuthPlugin, BaseTopicPlugin

from labd.auth import Credentials, Principals, Rule, check_password, permits, rules_for
from labd.errors import LabdError

log = structlog.get_logger("labd.mqtt")


def listening(host: str, port: int, timeout: float = 0.5) -> bool:
    """Whether something accepts TCP connections on host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


@dataclass(frozen=True)
class Account:
    check: Callable[[str], bool]  # does this password open it?
    rules: list[Rule]


class Accounts:
    """The broker's accounts: labd itself, the local admin, principals with a password."""

    def __init__(
        self, prefix: str, principals: Principals, local: Credentials | None, daemon_user: str
    ) -> None:
        self.daemon_user = daemon_user
        self.daemon_password = secrets.token_urlsafe(24)
        self._accounts: dict[str, Account] = {
            daemon_user: Account(self._is_daemon_password, rules_for(prefix, None))
        }
        if local is not None and principals.local is not None:
            password = local.broker_password
            self._accounts[local.broker_username] = Account(
                lambda given: secrets.compare_digest(given, password),
                rules_for(prefix, principals.local),
            )
        for principal in principals:
            hashed = principal.broker_password_hash
            if hashed and principal.name not in self._accounts:
                self._accounts[principal.name] = Account(
                    _password_check(hashed), rules_for(prefix, principal)
                )

    def _is_daemon_password(self, given: str) -> bool:
        return secrets.compare_digest(given, self.daemon_password)

    def login(self, username: str | None, password: str | None) -> bool:
        account = self._accounts.get(username or "")
        return account is not None and account.check(password or "")

    def allows(self, username: str | None, topic: str, action: Action) -> bool:
        account = self._accounts.get(username or "")
        if account is None:
            return False
        return permits(account.rules, topic, "write" if action == Action.PUBLISH else "read")


def _password_check(hashed: str) -> Callable[[str], bool]:
    return lambda given: check_password(given, hashed)


class LabdAuthPlugin(BaseAuthPlugin):  # type: ignore[misc]  # amqtt is Any to mypy (pyproject)
    """amqtt authentication against labd's accounts (refuses anonymous clients)."""

    @dataclass
    class Config:
        accounts: Any = None

    async def authenticate(self, *, session: Any) -> bool | None:
        accounts: Accounts = self.config.accounts
        ok = accounts.login(session.username, session.password)
        if not ok:
            log.warning("embedded broker refused a client", username=ascii(session.username))
        return ok


class LabdTopicPlugin(BaseTopicPlugin):  # type: ignore[misc]  # amqtt is Any to mypy (pyproject)
    """amqtt topic filtering by labd's rules: publish, subscribe and receive."""

    @dataclass
    class Config:
        accounts: Any = None

    async def topic_filtering(
        self, *, session: Any = None, topic: str | None = None, action: Action | None = None
    ) -> bool | None:
        accounts: Accounts = self.config.accounts
        if session is None or topic is None or action is None:
            return False
        return accounts.allows(session.username, topic, action)


class EmbeddedBroker:
    """A component: starts amqtt on host:port, stops it last."""

    name = "mqtt-broker"

    def __init__(self, host: str, port: int, accounts: Accounts) -> None:
        self.host, self.port, self.accounts = host, port, accounts
        self._broker: object | None = None

    async def start(self) -> None:
        from amqtt.broker import Broker

        plugins = {"accounts": self.accounts}
        config = {
            "listeners": {"default": {"type": "tcp", "bind": f"{self.host}:{self.port}"}},
            "plugins": {
                f"{__name__}.LabdAuthPlugin": plugins,
                f"{__name__}.LabdTopicPlugin": plugins,
            },
        }
        broker = Broker(config)
        try:
            await broker.start()
        except Exception as e:
            raise LabdError(
                f"embedded MQTT broker: cannot listen on {self.host}:{self.port}: {e}"
            ) from e
        self._broker = broker
        log.info("embedded mqtt broker listening", host=self.host, port=self.port)

    async def stop(self, grace: float) -> None:
        if self._broker is not None:
            await self._broker.shutdown()  # type: ignore[attr-defined]
