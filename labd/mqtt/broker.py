"""The embedded broker that lets a bare machine work: amqtt, in-process, on loopback.

amqtt is the maintained pure-Python broker that runs inside our event loop with no extra
process or binary. It speaks MQTT 3.1.1 only, so nothing labd answers depends on MQTT 5
there (the bridge falls back, and every answer also goes to a plain topic).
"""

from __future__ import annotations

import socket

import structlog

from labd.errors import LabdError

log = structlog.get_logger("labd.mqtt")


def listening(host: str, port: int, timeout: float = 0.5) -> bool:
    """Whether something accepts TCP connections on host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


class EmbeddedBroker:
    """A component: starts amqtt on host:port, stops it last."""

    name = "mqtt-broker"

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self._broker: object | None = None

    async def start(self) -> None:
        from amqtt.broker import Broker

        config = {
            "listeners": {"default": {"type": "tcp", "bind": f"{self.host}:{self.port}"}},
            "plugins": {
                "amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": True}
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
