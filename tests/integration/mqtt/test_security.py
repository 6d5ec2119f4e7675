"""Who may talk to labd: TLS with a private CA, passwords, and the embedded broker's defaults."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

import trustme

from tests.conftest import LabdProcess
from tests.integration.mqtt.conftest import (
    CI,
    Follower,
    daemon_config,
    free_port,
    publish_signed,
    spec,
)
from tests.integration.mqtt.test_bridge import PREFIX, finished


async def test_tls_with_a_private_ca(
    mosquitto_factory: Any, start_labd: Any, tmp_path: Path
) -> None:
    ca = trustme.CA()
    server = ca.issue_cert("localhost", "127.0.0.1")
    ca_file, cert_file, key_file = (tmp_path / n for n in ("ca.pem", "server.pem", "server.key"))
    ca.cert_pem.write_to_path(str(ca_file))
    server.cert_chain_pems[0].write_to_path(str(cert_file))
    server.private_key_pem.write_to_path(str(key_file))
    broker = mosquitto_factory(f"cafile {ca_file}\ncertfile {cert_file}\nkeyfile {key_file}\n")
    daemon: LabdProcess = start_labd(
        daemon_config(tmp_path, f'url = "mqtts://127.0.0.1:{broker.port}"\ntls_ca = "{ca_file}"')
    )
    assert daemon.wait_for_log("mqtt connected")["protocol"] == "V5"
    assert daemon.get("/readyz")[1]["checks"]["broker"] == "ok"
    assert daemon.stop() == 0

    # Without the CA the broker's certificate is not trusted: labd stays up, not ready.
    stranger: LabdProcess = start_labd(
        daemon_config(tmp_path, f'url = "mqtts://127.0.0.1:{broker.port}"', name="stranger")
    )
    stranger.wait_for_log("mqtt connection lost; reconnecting")
    status, ready = stranger.get("/readyz")
    assert status == 503 and "CERTIFICATE_VERIFY_FAILED" in ready["checks"]["broker"]
    assert stranger.stop() == 0


async def test_anonymous_refused_when_passwords_are_configured(
    mosquitto_factory: Any, start_labd: Any, tmp_path: Path
) -> None:
    passwords = tmp_path / "passwd"
    passwords.touch()
    command = ["mosquitto_passwd", "-b", str(passwords), "labd", "s3cret-pw"]
    await asyncio.to_thread(subprocess.run, command, check=True)
    broker = mosquitto_factory(f"allow_anonymous false\npassword_file {passwords}\n")
    anonymous: LabdProcess = start_labd(
        daemon_config(tmp_path, f'url = "mqtt://127.0.0.1:{broker.port}"', name="anon")
    )
    anonymous.wait_for_log("mqtt connection lost; reconnecting")
    assert anonymous.get("/readyz")[0] == 503
    assert anonymous.stop() == 0
    daemon: LabdProcess = start_labd(
        daemon_config(
            tmp_path,
            f'url = "mqtt://127.0.0.1:{broker.port}"\nusername = "labd"\npassword = "s3cret-pw"',
        )
    )
    daemon.wait_for_log("mqtt connected")
    assert "s3cret-pw" not in daemon.raw_log()
    assert daemon.stop() == 0


async def test_embedded_broker_on_a_bare_machine(start_labd: Any, tmp_path: Path) -> None:
    port = free_port()
    daemon: LabdProcess = start_labd(daemon_config(tmp_path, f"embedded_port = {port}"))
    daemon.wait_for_log("embedded mqtt broker listening")
    assert daemon.wait_for_log("mqtt connected")["protocol"] == "V311"
    login = {"username": CI.broker_username, "password": CI.broker_password}
    async with Follower(port, topics=[f"{PREFIX}/jobs/+/events"], **login) as ci:
        await publish_signed(port, f"{PREFIX}/jobs/submit", {"id": "e1", "spec": spec()}, **login)
        await ci.wait_for(lambda: finished(ci, "e1"))
    # The local admin's credentials: made on first start, readable by labd's account only.
    local = tmp_path / "labd" / "credentials" / "local.toml"
    assert local.stat().st_mode & 0o777 == 0o600
    assert local.parent.stat().st_mode & 0o777 == 0o700
    assert daemon.stop() == 0


async def test_a_configured_url_never_starts_a_broker(start_labd: Any, tmp_path: Path) -> None:
    port = free_port()
    daemon: LabdProcess = start_labd(daemon_config(tmp_path, f'url = "mqtt://127.0.0.1:{port}"'))
    daemon.wait_for_log("mqtt connection lost; reconnecting")
    assert "embedded mqtt broker listening" not in daemon.raw_log()
    assert daemon.get("/readyz")[0] == 503
    assert daemon.stop() == 0


async def test_mutual_tls_with_a_client_certificate(
    mosquitto_factory: Any, start_labd: Any, tmp_path: Path
) -> None:
    ca = trustme.CA()
    server, client = ca.issue_cert("127.0.0.1"), ca.issue_cert("labd-client")
    paths = {n: tmp_path / n for n in ("ca.pem", "s.pem", "s.key", "c.pem", "c.key")}
    ca.cert_pem.write_to_path(str(paths["ca.pem"]))
    server.cert_chain_pems[0].write_to_path(str(paths["s.pem"]))
    server.private_key_pem.write_to_path(str(paths["s.key"]))
    client.cert_chain_pems[0].write_to_path(str(paths["c.pem"]))
    client.private_key_pem.write_to_path(str(paths["c.key"]))
    broker = mosquitto_factory(
        f"cafile {paths['ca.pem']}\ncertfile {paths['s.pem']}\nkeyfile {paths['s.key']}\n"
        "require_certificate true\n"
    )
    url = f'url = "mqtts://127.0.0.1:{broker.port}"\ntls_ca = "{paths["ca.pem"]}"'
    without: LabdProcess = start_labd(daemon_config(tmp_path, url, name="nocert"))
    without.wait_for_log("mqtt connection lost; reconnecting")
    assert without.get("/readyz")[0] == 503
    assert without.stop() == 0
    daemon: LabdProcess = start_labd(
        daemon_config(
            tmp_path, url + f'\ntls_cert = "{paths["c.pem"]}"\ntls_key = "{paths["c.key"]}"'
        )
    )
    daemon.wait_for_log("mqtt connected")
    assert daemon.get("/readyz")[1]["checks"]["broker"] == "ok"
    assert daemon.stop() == 0
