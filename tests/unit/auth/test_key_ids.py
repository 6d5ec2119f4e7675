"""One rule for a key id wherever it is made or read: `labd auth add`/`rotate`, the
configuration, a signed message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from labd.auth import Principal, Principals, Role, new_credentials, sign, verify
from labd.cli.main import main
from labd.config.access import PrincipalSettings
from labd.errors import AuthError
from labd.mqtt.messages import Signature


def test_auth_add_refuses_a_key_id_labd_run_would_refuse(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 70-character key id made a block `labd run` refused; now nothing is written."""
    out = tmp_path / "ci.toml"
    code = main(
        ["auth", "add", "ci", "--role", "submitter", "--key-id", "k" * 70, "--out", str(out)]
    )
    assert code == 2 and not out.exists()
    err = capsys.readouterr().err
    assert "--key-id: key id 'kkkk" in err and "is not [A-Za-z0-9_.-]{1,64}" in err
    assert (
        main(["auth", "add", "ci", "--role", "submitter", "--key-id", "bad id", "--out", str(out)])
        == 2
    )
    # The longest id allowed is taken by the configuration the printed block goes into.
    assert (
        main(["auth", "add", "ci", "--role", "submitter", "--key-id", "k" * 64, "--out", str(out)])
        == 0
    )
    creds = new_credentials("ci", "k" * 64)
    PrincipalSettings(role="submitter", secret_keys={creds.key_id: creds.secret_key})


@pytest.mark.parametrize("key_id", ["k" * 65, "k" * 128, "a/b", "k 1"])
def test_verify_holds_a_key_id_to_the_same_rule_as_the_message_model(key_id: str) -> None:
    creds = new_credentials("ci", key_id)
    principals = Principals([Principal("ci", Role.SUBMITTER, keys={key_id: creds.key})])
    message = sign({"spec": {}}, "t", "ci", key_id, creds.key)
    with pytest.raises(AuthError, match=r"auth\.key_id") as caught:
        verify(json.loads(json.dumps(message)), "t", principals, 900, 60)
    assert caught.value.reason == "malformed"
    with pytest.raises(ValueError, match="key_id"):
        Signature.model_validate(message["auth"])


def test_verify_refuses_a_nonce_the_ledger_cannot_hold() -> None:
    creds = new_credentials("ci")
    principals = Principals([Principal("ci", Role.SUBMITTER, keys={"k1": creds.key})])
    for nonce in ("short", "n" * 65):
        message = sign({"spec": {}}, "t", "ci", "k1", creds.key, nonce=nonce)
        with pytest.raises(AuthError, match=r"auth\.nonce is missing or not a string of 8 to 64"):
            verify(message, "t", principals, 900, 60)
