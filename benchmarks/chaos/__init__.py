"""A chaos campaign for a multi-host lab: hosts, database and broker under injected faults,
invariants checked from the recorded history afterwards (see benchmarks/chaos/run.py)."""
