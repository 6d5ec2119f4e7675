"""What a job's errors are masked with: every value the job's answers mask, that is long
enough to be masked in free text."""

from __future__ import annotations

from labd.auth import spec_secrets
from labd.redact import MASK, redact_text


def test_env_values_of_every_variant_and_secret_fields_are_found_short_ones_not() -> None:
    spec = {
        "scenario": "command",
        "params": {"command": ["run"], "env": {"API_TOKEN": "base-token", "LEVEL": "on"}},
        "ab": {"new": {"params": {"env": {"API_TOKEN": "new-token"}}}},
        "extra": {"db_password": "hunter22", "retries": 3},
    }
    assert spec_secrets(spec) == ["base-token", "hunter22", "new-token"]


def test_a_secret_inside_a_longer_one_leaves_nothing_of_the_longer() -> None:
    text = "tokens: abcd and abcdefgh"
    assert redact_text(text, ["abcd", "abcdefgh"]) == f"tokens: {MASK} and {MASK}"


def test_a_password_in_a_url_is_masked_a_port_and_a_path_with_an_at_sign_are_not() -> None:
    assert redact_text("postgresql://labd:hunter22@db:5432/labd") == (
        f"postgresql://labd:{MASK}@db:5432/labd"
    )
    assert redact_text("mqtt://ci:1234@broker") == f"mqtt://ci:{MASK}@broker"  # digits alone
    # was "http://127.0.0.1:**********@me": a port read as a password
    for url in ("http://127.0.0.1:8000/users/@me", "http://h:80?to=a@b", "http://h:80#x@y"):
        assert redact_text(f"{url} did not load") == f"{url} did not load"
