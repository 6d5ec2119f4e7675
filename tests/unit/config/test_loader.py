from __future__ import annotations

from pathlib import Path

import pytest

from labd.config import Settings, load_config
from labd.config.example import render_example
from labd.errors import ConfigError

ROOT = Path(__file__).parents[3]
EXAMPLE = ROOT / "config.example.toml"


def problems_of(path: Path | None, environ: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ=environ or {})
    return caught.value.problems


def test_example_file_is_generated_from_the_models() -> None:
    """config.example.toml lists every key with its comment: regenerate it if this fails."""
    assert EXAMPLE.read_text() == render_example(), "run: labd config example > config.example.toml"


def test_example_file_is_valid_and_holds_the_defaults() -> None:
    from labd_android import AndroidOptions
    from labd_host.driver import HostOptions
    from labd_sim.driver import SimOptions
    from labd_windows import WindowsOptions
    from labd_x11 import X11Options

    settings = load_config(EXAMPLE, environ={}).settings
    assert settings.drivers == {
        "android": AndroidOptions().model_dump(),
        "host": HostOptions().model_dump(),
        "sim": SimOptions().model_dump(),
        "windows": WindowsOptions().model_dump(),
        "x11": X11Options().model_dump(),
    }
    assert settings.model_copy(update={"drivers": {}}) == Settings()


def test_wrong_type_names_file_key_and_value(tmp_path: Path) -> None:
    path = tmp_path / "labd.toml"
    path.write_text('[http]\nport = "abc"\n')
    assert problems_of(path) == [
        "labd.toml: http.port: input should be a valid integer, "
        "unable to parse string as an integer, got 'abc'"
    ]


def test_a_huge_wrong_value_is_quoted_in_part(tmp_path: Path) -> None:
    path = tmp_path / "labd.toml"
    path.write_text(f'[http]\nport = "{"9" * 5000}x"\n')
    (problem,) = problems_of(path)
    assert problem.startswith("labd.toml: http.port: ")
    assert problem.endswith("... (5,001 characters)") and len(problem) < 250  # the value's own


def test_a_file_over_the_size_limit_is_refused_in_one_line(tmp_path: Path) -> None:
    # It was read whole: `labd config check /dev/zero` took all the memory there was.
    from labd.config.loader import CONFIG_LIMIT

    path = tmp_path / "labd.toml"
    body = "[http]\nport = 1234\n"
    path.write_text(body + "#" * (CONFIG_LIMIT - len(body) - 1) + "\n")
    assert load_config(path, environ={}).settings.http.port == 1234  # exactly the limit
    path.write_text(body + "#" * (CONFIG_LIMIT - len(body)) + "\n")
    assert problems_of(path) == [f"{path}: larger than 1 MiB, the limit for a configuration file"]


def test_environment_names_what_it_cannot_set_and_how_to_set_a_table(tmp_path: Path) -> None:
    # It said "drivers takes no sub-keys" though the guide said every key could be overridden.
    path = tmp_path / "labd.toml"
    path.write_text("")
    env = {
        "LABD_DRIVERS__HOST__ID": "x",
        "LABD_AUTH__PRINCIPALS__CI__ROLE": "viewer",
        "LABD_HTTP__PORT__X": "1",
    }
    assert problems_of(path, env) == [
        "LABD_AUTH__PRINCIPALS__CI__ROLE: auth.principals takes no sub-keys: "
        "set LABD_AUTH__PRINCIPALS to the whole table as JSON",
        "LABD_DRIVERS__HOST__ID: drivers: set in the configuration file only, "
        "not from the environment",
        "LABD_HTTP__PORT__X: http.port takes no sub-keys",
    ]
    table = {"LABD_ARTEFACTS__SUITES": '{"s": {"max_age_days": 3}}'}
    assert load_config(path, environ=table).settings.artefacts.suites["s"].max_age_days == 3


def test_unknown_key_suggests_the_closest_one(tmp_path: Path) -> None:
    path = tmp_path / "labd.toml"
    path.write_text("[daemon]\nshutdown_grase = 3\n[htp]\nport = 1\n")
    assert problems_of(path) == [
        "labd.toml: daemon.shutdown_grase: unknown key (did you mean 'shutdown_grace'?)",
        "labd.toml: htp: unknown key (did you mean 'http'?)",
    ]


def test_out_of_bounds_value_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "labd.toml"
    path.write_text("[http]\nport = 70000\n")
    (problem,) = problems_of(path)
    assert problem.startswith("labd.toml: http.port: input should be less than or equal to 65535")


def test_toml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "labd.toml"
    path.write_text("[http]\nport = = 3\n")
    (problem,) = problems_of(path)
    assert problem.startswith("labd.toml: not valid TOML:") and "line 2" in problem


def test_missing_explicit_file_is_an_error(tmp_path: Path) -> None:
    assert problems_of(tmp_path / "nope.toml") == [f"{tmp_path / 'nope.toml'}: no such file"]


def test_environment_overrides_the_file(tmp_path: Path) -> None:
    path = tmp_path / "labd.toml"
    path.write_text("[http]\nport = 9000\n")
    env = {"LABD_HTTP__PORT": "9100", "LABD_LOG__LEVEL": "debug", "LABD_REQUIRE_SERVICES": "1"}
    settings = load_config(path, environ=env).settings
    assert (settings.http.port, settings.log.level) == (9100, "debug")


def test_bad_environment_value_names_the_variable() -> None:
    env = {"LABD_HTTP__PORT": "x", "LABD_HTTP__PROT": "1"}
    assert problems_of(None, env) == [
        "LABD_HTTP__PROT: http.prot: unknown key (did you mean 'port'?)",
        "LABD_HTTP__PORT: http.port: input should be a valid integer, "
        "unable to parse string as an integer, got 'x'",
    ]


def test_a_section_and_key_joined_by_one_underscore_are_refused_not_ignored() -> None:
    # Ignored, LABD_ARTEFACTS_MAX_AGE_DAYS would leave retention at its default unnoticed.
    env = {
        "LABD_ARTEFACTS_MAX_AGE_DAYS": "3",
        "LABD_HTTP_PROT": "1",
        "LABD_API_URL": "http://lab:9500",  # labd's own variables name no section
        "LABD_CACHE_DIR": "/tmp",
        "LABD_DRIVERS_HOST_SLOTS": "3",
    }
    assert problems_of(None, env) == [
        "LABD_ARTEFACTS_MAX_AGE_DAYS: not read: a section and its key are joined by two "
        "underscores: LABD_ARTEFACTS__MAX_AGE_DAYS",
        "LABD_DRIVERS_HOST_SLOTS: not read: drivers are set in the configuration file only",
        "LABD_HTTP_PROT: not read: a section and its key are joined by two underscores "
        "(LABD_HTTP__KEY)",
    ]


def test_file_is_found_through_labd_config_then_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "labd.toml").write_text("[http]\nport = 1111\n")
    other = tmp_path / "other.toml"
    other.write_text("[http]\nport = 2222\n")
    monkeypatch.delenv("LABD_CONFIG", raising=False)
    assert load_config(environ={}).settings.http.port == 1111
    monkeypatch.setenv("LABD_CONFIG", str(other))
    assert load_config(environ={}).settings.http.port == 2222


def test_a_user_name_or_password_in_artefacts_base_url_is_refused_unechoed(
    tmp_path: Path,
) -> None:
    """base_url is published in every result message: credentials in it are a clear error at
    load, and the error does not repeat the password."""
    path = tmp_path / "labd.toml"
    path.write_text('[artefacts]\nbase_url = "https://ci:pw-9f3@lab-1.example:9472"\n')
    (problem,) = problems_of(path)
    assert problem.startswith("labd.toml: artefacts.base_url: ")
    assert "no user name or password" in problem and "pw-9f3" not in problem
    path.write_text('[artefacts]\nbase_url = "https://lab-1.example:9472/"\n')
    assert load_config(path, environ={}).settings.artefacts.base_url == "https://lab-1.example:9472"


def test_a_check_across_keys_names_the_variables_it_came_from(tmp_path: Path) -> None:
    # LABD_HTTP__API_PORT equal to http.port was reported as `labd.toml: http: ...`.
    reason = "value error, api_port must differ from port"
    path = tmp_path / "labd.toml"
    path.write_text("[http]\n[log]\nlevel = 'info'\n")
    (problem,) = problems_of(path, {"LABD_HTTP__API_PORT": "9471"})
    assert problem.startswith(f"LABD_HTTP__API_PORT: http: {reason}")
    (problem,) = problems_of(None, {"LABD_HTTP__API_PORT": "9500", "LABD_HTTP__PORT": "9500"})
    assert problem.startswith(f"LABD_HTTP__API_PORT and LABD_HTTP__PORT: http: {reason}")
    path.write_text("[http]\nport = 9500\n")
    (problem,) = problems_of(path, {"LABD_HTTP__API_PORT": "9500"})
    assert problem.startswith(f"labd.toml and LABD_HTTP__API_PORT: http: {reason}")
    path.write_text("[http]\nport = 9500\napi_port = 9500\n")
    (problem,) = problems_of(path, {"LABD_LOG__LEVEL": "debug"})
    assert problem.startswith(f"labd.toml: http: {reason}")


def test_a_bad_value_inside_a_table_given_as_json_names_the_variable(tmp_path: Path) -> None:
    path = tmp_path / "labd.toml"
    path.write_text("[artefacts.suites.s]\nmax_age_days = 3\n")
    env = {"LABD_ARTEFACTS__SUITES": '{"s": {"max_age_days": "x"}}'}
    (problem,) = problems_of(path, env)
    assert problem.startswith("LABD_ARTEFACTS__SUITES: artefacts.suites.s.max_age_days: ")


def test_a_boolean_is_not_taken_for_a_number(tmp_path: Path) -> None:
    """`raw_max_age_days = true` read as 1 day would remove a year of raw values."""
    path = tmp_path / "labd.toml"
    path.write_text("[store]\nraw_max_age_days = true\n[http]\nport = false\n")
    assert problems_of(path) == [
        "labd.toml: http.port: expected a number, not a boolean, got False",
        "labd.toml: store.raw_max_age_days: expected a number, not a boolean, got True",
    ]
    env = {"LABD_STORE__RAW_MAX_AGE_DAYS": "30", "LABD_HTTP__CONSOLE": "false"}
    settings = load_config(None, environ=env).settings  # strings from the environment still
    assert (settings.store.raw_max_age_days, settings.http.console) == (30, False)


def test_a_plugins_own_options_take_no_boolean_for_a_number() -> None:
    from labd.pool.plugins import check_plugin_options

    with pytest.raises(ConfigError) as caught:
        check_plugin_options(
            {"android": {"min_battery": True, "start_adb_server": True, "adb_port": "5037"}},
            {},
            "f",
        )
    assert caught.value.problems == [
        "f: drivers.android.min_battery: expected a number, not a boolean, got True",
        "f: drivers.android.adb_port: expected a number, not a string, got '5037'",
    ]
