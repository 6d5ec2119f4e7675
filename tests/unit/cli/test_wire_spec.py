"""`labd submit` sends the manifest as written: a daemon of an older version, whose spec has
not got a key this CLI knows, refused the whole default-filled spec naming the user's file
(`queue_timeout_s: unknown key`, which the file did not hold)."""

from __future__ import annotations

from pathlib import Path

from labd.cli.jobs_cmd import wire_spec
from labd.model import TestSpec, load_manifest


def test_only_what_the_manifest_says_is_sent_and_it_means_the_same(tmp_path: Path) -> None:
    manifest = tmp_path / "job.toml"
    manifest.write_text(
        'suite = "s"\ntest = "t"\nscenario = "command"\niterations = 3\n'
        '[params]\ncommand = ["python3", "-c", "pass"]\n[device]\nplatform = "host"\n'
    )
    spec = load_manifest(manifest)
    wire = wire_spec(spec)
    assert wire == {
        "suite": "s",
        "test": "t",
        "scenario": "command",
        "iterations": 3,
        "params": {"command": ["python3", "-c", "pass"]},
        "device": {"platform": "host"},
    }
    assert TestSpec.model_validate(wire) == spec  # the daemon fills in the same defaults
