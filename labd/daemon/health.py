"""Which of the daemon's components are down right now, from the supervisor's events: /readyz
names them (503) and /metrics has `labd_component_up`."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from labd.events import ComponentDown, ComponentUp, Event, EventBus, dispatch
from labd.tasks import TaskSet


class ComponentHealth(Collector):
    """A component of its own: follows ComponentDown/ComponentUp events."""

    name = "health"

    def __init__(self, bus: EventBus, registry: CollectorRegistry) -> None:
        self.bus = bus
        self.down: dict[str, str] = {}
        self.seen: set[str] = set()
        self._events = bus.subscribe("health", ComponentDown, ComponentUp)
        self._tasks = TaskSet("health")
        registry.register(self)

    async def start(self) -> None:
        self._tasks.spawn("events", dispatch(self._events, self._on_event))

    async def stop(self, grace: float) -> None:
        self.bus.unsubscribe(self._events)
        await self._tasks.cancel_all(grace)

    async def _on_event(self, event: Event) -> None:
        if isinstance(event, ComponentDown):
            self.seen.add(event.component)
            self.down[event.component] = event.error
        elif isinstance(event, ComponentUp):
            self.seen.add(event.component)
            self.down.pop(event.component, None)

    async def probe(self) -> str | None:
        """For /readyz: None when every component runs, else which are down and why."""
        if not self.down:
            return None
        return "; ".join(f"{name} down: {error}" for name, error in sorted(self.down.items()))

    def collect(self) -> Iterator[GaugeMetricFamily]:
        up = GaugeMetricFamily(
            "labd_component_up",
            "1 while a supervised component runs, 0 while it is down and restarting.",
            labels=["component"],
        )
        for name in sorted(self.seen | set(self.down)):
            up.add_metric([name], 0 if name in self.down else 1)
        yield up
