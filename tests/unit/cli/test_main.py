from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[3]


def labd(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "labd", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def test_help_and_version_import_no_heavy_module() -> None:
    """`labd --help` stays fast because nothing heavy is imported before a command runs."""
    code = (
        "import sys, contextlib, io\n"
        "from labd.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['version'])\n"
        "    try: main(['--help'])\n"
        "    except SystemExit: pass\n"
        "heavy = ['pydantic', 'structlog', 'aiohttp', 'numpy', 'scipy', 'statsmodels', 'cv2',\n"
        "         'sqlalchemy', 'prometheus_client', 'aiomqtt']\n"
        "print([m for m in heavy if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_version_json() -> None:
    """It names the database schema too: every build said 0.1.0, though an upgrade or a
    rollback turns on the schema each migrates to (a tester's find)."""
    from labd.store.migrations import LATEST

    result = labd("version", "--json")
    assert result.returncode == 0
    said = json.loads(result.stdout)
    assert said["version"] and said["schema"] == LATEST
    assert labd("version").stdout == f"labd {said['version']} (database schema {LATEST})\n"


def test_broken_config_is_one_line_exit_2_no_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "labd.toml"
    bad.write_text('[http]\nport = "abc"\n')
    result = labd("--config", str(bad), "run")
    assert result.returncode == 2
    assert result.stderr == (
        "labd.toml: http.port: input should be a valid integer, "
        "unable to parse string as an integer, got 'abc'\n"
    )


def test_config_check_prints_effective_config_with_secrets_masked(tmp_path: Path) -> None:
    result = labd("config", "check", str(ROOT / "config.example.toml"), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["valid"] and report["settings"]["http"]["port"] == 9471


def test_config_check_says_which_installed_plugins_labd_would_leave_out(tmp_path: Path) -> None:
    """A plugin tester's find: a package registered a driver as `host`; `config check` said
    only `valid`, and the lab had lost its host device (now the built-in keeps its name)."""
    dist = tmp_path / "careless_driver-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: careless-driver\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[labd.drivers]\nhost = careless_driver:Driver\n")
    example = str(ROOT / "config.example.toml")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    run = [sys.executable, "-m", "labd", "config", "check", example]
    text = subprocess.run(run, capture_output=True, text=True, timeout=60, env=env)
    assert text.returncode == 0, text.stderr
    assert (
        "# plugin labd.drivers:host refused, labd runs without it: careless_driver:Driver (from "
        "careless-driver 0.1) is registered as 'host', the name of labd's own plugin, which is "
        "kept; give the other plugin its own name"
    ) in text.stdout
    answer = subprocess.run([*run, "--json"], capture_output=True, text=True, timeout=60, env=env)
    assert list(json.loads(answer.stdout)["plugins_refused"]) == ["labd.drivers:host"]
    clean = json.loads(labd("config", "check", example, "--json").stdout)
    assert clean["plugins_refused"] == {}


def test_config_check_names_the_variables_that_changed_values() -> None:
    """It said `# labd.toml: valid` when a variable had turned the console off."""
    import os

    example = str(ROOT / "config.example.toml")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LABD_")}
    env |= {"LABD_HTTP__CONSOLE": "false", "LABD_LOG__LEVEL": "debug"}
    command = [sys.executable, "-m", "labd", "config", "check", example]
    text = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)
    assert text.stdout.splitlines()[0] == (
        f"# {example} (with LABD_HTTP__CONSOLE, LABD_LOG__LEVEL): valid"
    )
    report = json.loads(
        subprocess.run([*command, "--json"], capture_output=True, text=True, env=env).stdout
    )
    assert report["environment"] == ["LABD_HTTP__CONSOLE", "LABD_LOG__LEVEL"]
    assert report["settings"]["http"]["console"] is False


def test_usage_error_exits_2() -> None:
    assert labd("no-such-command").returncode == 2


def test_config_check_with_principals_masks_every_credential(tmp_path: Path) -> None:
    # A configuration with principals crashed `config check`, and the crash line printed the
    # HMAC key it had tried to render.
    key = "q3Vx8mJ0b2tlbi1rZXktdGhhdC1pcy0zMi1ieXRlcyE"
    config = tmp_path / "labd.toml"
    config.write_text(
        f'[auth.principals.ci]\nrole = "submitter"\nsecret_keys = {{ k1 = "{key}" }}\n'
        f'token_sha256 = ["{"a" * 64}"]\n'
    )
    for extra in ([], ["--json"]):
        result = labd("config", "check", str(config), *extra)
        assert result.returncode == 0, result.stderr
        assert key not in result.stdout + result.stderr
        assert "a" * 64 not in result.stdout
        assert "submitter" in result.stdout
    report = json.loads(labd("config", "check", str(config), "--json").stdout)
    assert report["settings"]["auth"]["principals"]["ci"]["role"] == "submitter"


def test_config_check_refuses_what_run_refuses_and_never_echoes_a_secret(tmp_path: Path) -> None:
    # Each said "valid" or printed the secret; the driver sections were checked only by `run`.
    cases = {
        '[mqtt]\nurl = "http://labd:hunter2@127.0.0.1:1883"\n': "labd:**********@127.0.0.1",
        "[artefacts]\nmax_total_mb = 1e400\n": "should be a finite number",
        '[drivers.sim]\nprefix = "../x"\n': "drivers.sim.prefix: string should match",
        '[drivers.host]\nid = "dev/1#x"\n': "drivers.host.id: string should match",
        "[drivers.nope]\nx = 1\n": "drivers.nope: no such driver",
    }
    for text, says in cases.items():
        config = tmp_path / "labd.toml"
        config.write_text(text)
        result = labd("config", "check", str(config))
        assert (result.returncode, says in result.stderr) == (2, True), (text, result.stderr)
        assert "hunter2" not in result.stderr
    env = {"LABD_AUTH__PRINCIPALS": '{"p":{"role":"viewer","secret_keys":{"k1":"hunter2"}'}
    result = subprocess.run(
        [sys.executable, "-m", "labd", "config", "check"],
        capture_output=True, text=True, timeout=60, env={**os.environ, **env},
    )  # fmt: skip
    assert result.returncode == 2 and "auth.principals" in result.stderr
    assert "hunter2" not in result.stderr


def test_config_check_renders_a_suite_that_sets_one_limit(tmp_path: Path) -> None:
    # The limit left out is None (the section's): it crashed the TOML rendering.
    config = tmp_path / "labd.toml"
    config.write_text("[artefacts.suites.ok]\nmax_age_days = 3\n[auth]\nlocal_credentials = true\n")
    result = labd("config", "check", str(config))
    assert result.returncode == 0, result.stderr
    assert "[artefacts.suites.ok]\nmax_age_days = 3.0\n" in result.stdout
    assert "local_credentials = true" in result.stdout  # a switch is not a secret


def test_an_endless_input_is_refused_at_the_size_limit() -> None:
    # `labd submit /dev/zero` and `labd config check /dev/zero` never ended, eating gigabytes.
    # The address-space cap keeps a regression from taking the machine's memory with it.
    def cap() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    for args, what in (
        (["submit", "/dev/zero"], "a manifest"),
        (["config", "check", "/dev/zero"], "a configuration file"),
    ):
        result = subprocess.run(
            [sys.executable, "-m", "labd", *args],
            capture_output=True, text=True, timeout=60, preexec_fn=cap,
        )  # fmt: skip
        assert (result.returncode, result.stderr) == (
            2,
            f"/dev/zero: larger than 1 MiB, the limit for {what}\n",
        )


def test_config_check_refuses_a_run_as_user_this_host_lacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # `config check` said "valid" where `labd run` (as root) refused the account.
    from labd.cli.main import main

    monkeypatch.setattr(os, "geteuid", lambda: 0)  # run_as applies when labd is root
    config = tmp_path / "c2.toml"
    config.write_text('[policy]\nrun_as = "nosuchuser-labd"\n')
    assert main(["config", "check", str(config)]) == 2
    assert capsys.readouterr().err == (
        "c2.toml: policy.run_as: no such user 'nosuchuser-labd' on this host\n"
    )


def test_what_a_command_logs_goes_to_stderr_not_into_its_json(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A plugin refused while `labd config check --json` loaded the plugins printed its log
    line on stdout, ahead of the JSON a script parses."""
    import structlog

    import labd.pool
    from labd.cli import main as cli

    def refusing(*args: object, **kwargs: object) -> list[str]:
        structlog.get_logger("labd.pool").warning("plugin refused", plugin="gizmo")
        return []

    monkeypatch.setattr(labd.pool, "run_refusals", refusing)
    saved = structlog.get_config()
    structlog.reset_defaults()  # as in a fresh process
    try:
        assert cli.main(["config", "check", str(ROOT / "config.example.toml"), "--json"]) == 0
        out, err = capsys.readouterr()
        assert json.loads(out)["valid"] is True
        assert "plugin refused" in err
    finally:
        structlog.reset_defaults()
        structlog.configure(**saved)


def test_a_daemon_named_elsewhere_gets_the_submission_not_the_local_broker(
    tmp_path: Path,
) -> None:
    """`--api-url` was ignored by `submit`, which went over this configuration's broker to
    the local lab and said `queued` (a tester's find)."""
    manifest = tmp_path / "job.toml"
    manifest.write_text(
        'suite = "s"\ntest = "t"\nscenario = "command"\n[params]\ncommand = ["true"]\n'
    )
    config = tmp_path / "labd.toml"
    config.write_text('[mqtt]\nurl = "mqtt://127.0.0.1:1"\n')  # would fail differently
    nowhere = "http://127.0.0.1:9"  # the discard port: nothing answers
    # A principal's own credentials (without them the CLI stops sooner, saying so; the
    # suite's earlier `labd submit` runs write the local ones into $HOME).
    credentials = tmp_path / "ci.toml"
    credentials.write_text(
        'principal = "ci"\nkey_id = "k1"\nsecret_key = "x"\ntoken = "t"\n'
        'broker_username = "ci"\nbroker_password = "x"\n'
    )
    sent = labd(
        "--config",
        str(config),
        "--api-url",
        nowhere,
        "submit",
        str(manifest),
        "--connect-wait",
        "0",
        env={"LABD_CREDENTIALS": str(credentials)},
    )
    assert sent.returncode != 0 and f"cannot reach the daemon at {nowhere}" in sent.stderr
    both = labd(
        "--config", str(config), "--api-url", nowhere, "submit", str(manifest), "--via", "mqtt"
    )
    assert both.returncode == 2
    assert (
        f"--via mqtt uses this configuration's broker, not the daemon at {nowhere}" in both.stderr
    )
    shown = labd(
        "--config", str(config), "--api-url", nowhere, "jobs", "show", "j", "--via", "mqtt"
    )
    assert shown.returncode == 2 and "leave out one of the two" in shown.stderr


def test_an_unknown_option_is_refused_with_its_commands_usage() -> None:
    """`labd submit --bogus` printed labd's whole usage, which does not list submit's options."""
    refused = labd("submit", "--bogus", "job.toml")
    assert refused.returncode == 2
    assert refused.stderr.startswith("usage: labd submit ")
    assert refused.stderr.endswith("labd submit: error: unrecognized arguments: --bogus\n")
    # Given before the command, it is labd's own option that is unknown.
    before = labd("--bogus", "status")
    assert before.returncode == 2
    assert before.stderr.endswith("labd: error: unrecognized arguments: --bogus\n")


def test_an_api_url_with_a_path_is_refused_not_dropped(tmp_path: Path) -> None:
    """`--api-url http://host:port/x` sent every request to the root (a re-tester's find)."""
    result = labd("--api-url", "http://127.0.0.1:9/labd", "jobs", "list")
    assert result.returncode == 2
    assert "labd's API is at the root of its port; a path, a query or a fragment" in result.stderr


def test_status_names_another_program_on_the_port_without_a_traceback(tmp_path: Path) -> None:
    """A program that is not labd answering on [http] port crashed `labd status` with a
    JSONDecodeError (a re-tester's find)."""
    import http.server
    import threading

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        config = tmp_path / "labd.toml"
        config.write_text(
            f'[daemon]\nstate_dir = "{tmp_path / "s"}"\n[http]\nport = {server.server_port}\n'
        )
        result = labd("--config", str(config), "status")
    finally:
        server.shutdown()
    assert result.returncode == 3, result.stderr
    assert "healthz: not labd: the program at http://127.0.0.1:" in result.stdout
    assert "unexpected error" not in result.stderr
