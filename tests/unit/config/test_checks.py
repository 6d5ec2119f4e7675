"""Values `labd config check` refuses because `labd run` could not use them, each naming its
key: suite names outside the name grammar, Perfherder options Treeherder would not take, a
state directory that cannot be one, TLS files that are not there."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from labd.config import load_config
from labd.daemon.statedir import prepare_state_dir
from labd.errors import ConfigError


def problems_of(text: str, tmp_path: Path, environ: dict[str, str] | None = None) -> list[str]:
    path = tmp_path / "labd.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ=environ or {})
    return caught.value.problems


@pytest.mark.parametrize(
    ("name", "shown"),
    [("a/b", "holds '/'"), ("(other)", "holds '('"), ("(unknown)", "holds '('"),
     ("ünï", "holds '\\xfc'"), ('x"}\nz', "holds '\"'"), ("-x", "starts with '-'"),
     ("x" * 129, "129 characters long")],
)  # fmt: skip
def test_a_suite_name_outside_the_grammar_is_refused_by_file_and_variable(
    tmp_path: Path, name: str, shown: str
) -> None:
    key = name.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    (problem,) = problems_of(f'[artefacts.suites."{key}"]\nmax_age_days = 3\n', tmp_path)
    assert problem.startswith("labd.toml: artefacts.suites: value error, suite name ")
    assert shown in problem and "\n" not in problem
    env = {"LABD_ARTEFACTS__SUITES": json.dumps({name: {}})}
    (problem,) = problems_of("", tmp_path, env)
    assert problem.startswith("LABD_ARTEFACTS__SUITES: artefacts.suites: value error, suite name")
    assert shown in problem


def test_a_suite_name_of_the_job_grammar_is_taken(tmp_path: Path) -> None:
    path = tmp_path / "labd.toml"
    path.write_text('[artefacts.suites."browser.v2@lab:1_x-y"]\nmax_age_days = 3\n')
    assert list(load_config(path, environ={}).settings.artefacts.suites) == ["browser.v2@lab:1_x-y"]


def test_perfherder_options_are_refused_as_treeherder_would(tmp_path: Path) -> None:
    long = "o" * 101
    (problem,) = problems_of(f'[perfherder]\nextra_options = ["cold", "{long}"]\n', tmp_path)
    assert problem.startswith("labd.toml: perfherder.extra_options: value error, entry 2 ('ooo")
    assert "is 101 characters long; Perfherder takes at most 100" in problem
    (problem,) = problems_of('[perfherder]\nextra_options = ["cold", " cold "]\n', tmp_path)
    assert "entry 2 ('cold') repeats an earlier one" in problem
    (problem,) = problems_of('[perfherder]\nextra_options = [" "]\n', tmp_path)
    assert "entry 1 is blank" in problem
    path = tmp_path / "labd.toml"
    path.write_text(f'[perfherder]\nextra_options = ["{"o" * 100}", "cold"]\n')
    assert len(load_config(path, environ={}).settings.perfherder.extra_options) == 2


def test_a_state_dir_under_a_file_is_refused_by_the_check(tmp_path: Path) -> None:
    file = tmp_path / "a-file"
    file.write_text("")
    for state_dir in (file, file / "below"):
        (problem,) = problems_of(f'[daemon]\nstate_dir = "{state_dir}"\n', tmp_path)
        assert problem.startswith(
            f"labd.toml: daemon.state_dir: value error, {file} is not a directory"
        )


def test_a_state_dir_that_cannot_be_made_stops_the_start_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        prepare_state_dir(Path("/proc/nope/x"), sqlite=True)
    assert str(caught.value) == (
        "daemon.state_dir: cannot use /proc/nope/x as the state directory: "
        "No such file or directory (/proc/nope)"
    )
    config = tmp_path / "labd.toml"
    config.write_text(
        '[daemon]\nstate_dir = "/proc/nope/x"\n[http]\nenabled = false\n[mqtt]\nenabled = false\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "labd", "--log-level", "error", "--config", str(config), "run"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "daemon.state_dir: cannot use /proc/nope/x" in done.stderr
    assert "unexpected error" not in done.stderr


@pytest.mark.parametrize("key", ["tls_ca", "tls_cert", "tls_key"])
def test_a_tls_file_that_is_not_there_or_not_a_file_is_refused(tmp_path: Path, key: str) -> None:
    missing = tmp_path / "nope.pem"
    (problem,) = problems_of(f'[mqtt]\n{key} = "{missing}"\n', tmp_path)
    assert problem.startswith(f"labd.toml: mqtt.{key}: value error, {missing}: No such file")
    (problem,) = problems_of(f'[mqtt]\n{key} = "{tmp_path}"\n', tmp_path)
    assert f"mqtt.{key}: value error, {tmp_path} is not a regular file" in problem
    env = {f"LABD_MQTT__{key.upper()}": str(missing)}
    (problem,) = problems_of("", tmp_path, env)
    assert problem.startswith(f"LABD_MQTT__{key.upper()}: mqtt.{key}: value error, {missing}")
    there = tmp_path / "there.pem"
    there.write_text("pem")
    path = tmp_path / "labd.toml"
    path.write_text(f'[mqtt]\n{key} = "{there}"\n')
    assert getattr(load_config(path, environ={}).settings.mqtt, key) == str(there)
