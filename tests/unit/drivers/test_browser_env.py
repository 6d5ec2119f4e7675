"""What a browser labd starts inherits: the environment labd.process.program_env makes (a
search path, the profile as home, the locale) and the open-files limit labd started with,
never labd's own variables. The page-load browser got labd's whole environment, a broker
password among it, and the raised limit."""

from __future__ import annotations

import json
import resource
import sys
from pathlib import Path

import pytest

from labd.process import program_env
from labd_x11 import X11Desktop

PROBE = (
    "import json, os, resource, sys; "
    "json.dump({'env': dict(os.environ), "
    "'files': resource.getrlimit(resource.RLIMIT_NOFILE)[0]}, open(sys.argv[1], 'w'))"
)


def test_the_browser_gets_its_own_environment_and_labds_first_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LABD_MQTT__PASSWORD", "topsecret-mqtt-pw")
    monkeypatch.setattr("labd.process.child.SOFT_OPEN_FILES_AT_START", 200)
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] > 200
    out = tmp_path / "seen.json"
    env = program_env("/usr/local/bin:/usr/bin:/bin", str(tmp_path))
    desktop = X11Desktop(":99", (640, 480))
    process = desktop.start(
        [sys.executable, "-c", PROBE, str(out)], tmp_path, None, False, None, env
    )
    assert process.wait(30) == 0
    seen = json.loads(out.read_text())
    assert seen["files"] == 200
    assert not any(k.startswith("LABD_") for k in seen["env"])
    assert "topsecret-mqtt-pw" not in out.read_text()
    assert seen["env"]["PATH"] == "/usr/local/bin:/usr/bin:/bin"
    assert seen["env"]["HOME"] == str(tmp_path) and seen["env"]["DISPLAY"] == ":99"
