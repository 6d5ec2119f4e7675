"""labd: an event-driven lab orchestrator for performance testing on real devices."""

__version__ = "0.1.0"
