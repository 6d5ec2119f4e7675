"""`labd config check` and `labd config example`."""

from __future__ import annotations

import argparse
import json
import os

from labd.config import env_overrides, load_config, masked_dump, render_example, render_toml
from labd.errors import ConfigError
from labd.sdk import DRIVER_GROUP, POWER_GROUP, load_plugins


def check(args: argparse.Namespace) -> int:
    """Validate the configuration and print it as labd would run it, secrets masked."""
    from labd.pool import run_refusals

    loaded = load_config(args.file or args.config)
    source = str(loaded.path) if loaded.path else "built-in defaults"
    # The plugins' own sections and the host's policy too: what `labd run` would refuse is
    # refused here, every problem at once.
    if problems := run_refusals(loaded.settings, loaded.path.name if loaded.path else source):
        raise ConfigError(problems)
    effective = masked_dump(loaded.settings)
    # Variables that changed values (all valid by now): the file alone does not say it all.
    overrides = env_overrides(os.environ)
    # Installed plugins labd would leave out: not the file's fault, but the lab would run
    # without them, which "valid" alone hid.
    refused = {
        f"{group}:{name}": why
        for group in (DRIVER_GROUP, POWER_GROUP)
        for name, why in load_plugins(group).refused.items()
    }
    if args.json:
        answer = {"source": source, "environment": overrides, "valid": True,
                  "plugins_refused": refused, "settings": effective}  # fmt: skip
        print(json.dumps(answer, indent=2))
    else:
        changed = f" (with {', '.join(overrides)})" if overrides else ""
        print(f"# {source}{changed}: valid")
        for plugin, why in refused.items():
            print(f"# plugin {plugin} refused, labd runs without it: {why}")
        print()
        print(render_toml(effective))
    return 0


def example(_: argparse.Namespace) -> int:
    """Print the example configuration, rendered from the models."""
    print(render_example(), end="")
    return 0
