"""A plugin module that fails when imported."""

raise RuntimeError("the vendor library is missing")
