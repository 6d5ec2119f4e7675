"""Sign-ins on a real daemon's console: one principal signing in again and again is refused
after SIGN_INS_PER_MINUTE, audited, and signs no other principal out."""

from __future__ import annotations

from labd.console.access import SIGN_INS_PER_MINUTE
from tests.integration.http.conftest import TOKENS, Lab
from tests.integration.http.test_console_front_door import ask, sign_in


def test_a_principal_signing_in_again_and_again_is_refused_and_signs_no_one_out(
    lab: Lab,
) -> None:
    """1,001 viewer sign-ins took 0.8 s and evicted every other session (the admin's got 401)."""
    daemon = lab.daemon
    status, admin = sign_in(daemon, daemon.token)
    assert status == 303
    answers = [sign_in(daemon, TOKENS["viewer"])[0] for _ in range(SIGN_INS_PER_MINUTE + 5)]
    assert answers == [303] * SIGN_INS_PER_MINUTE + [429] * 5
    assert ask(daemon, "GET", "/console/devices", {"Cookie": admin})[0] == 200
    refused = [line for line in daemon.logs() if line.get("reason") == "rate_limited"]
    assert [(line["principal"], line["action"]) for line in refused] == [("viewer", "sign_in")] * 5
