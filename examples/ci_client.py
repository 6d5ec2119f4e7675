"""A CI system submits a job to labd over MQTT and waits for its verdict.

Usage: python examples/ci_client.py MANIFEST.toml [host[:port]] [lab]
Credentials: the file in $LABD_CREDENTIALS (else ~/.config/labd/credentials.toml), as
`labd auth add NAME --role submitter` writes it. Exits 0 when the job succeeded, 1 otherwise.

It needs only aiomqtt and rfc8785 (not labd), to show the whole protocol: each request is
signed with HMAC-SHA256 over "labd-mqtt-v1", the topic and the RFC 8785 form of the message.
"""

import asyncio
import base64
import hashlib
import hmac
import json
import os
import secrets
import sys
import time
import tomllib
import uuid
from pathlib import Path

import aiomqtt
import rfc8785


def signed(message: dict, topic: str, creds: dict) -> bytes:
    auth = {
        "principal": creds["principal"],
        "key_id": creds["key_id"],
        "time": time.time(),
        "nonce": secrets.token_urlsafe(16),
    }
    body = {**message, "auth": auth}
    key = base64.urlsafe_b64decode(creds["secret_key"] + "=" * (-len(creds["secret_key"]) % 4))
    data = b"labd-mqtt-v1\n" + topic.encode() + b"\n" + rfc8785.dumps(body)
    mac = hmac.new(key, data, hashlib.sha256).digest()
    auth["signature"] = base64.urlsafe_b64encode(mac).rstrip(b"=").decode()
    return json.dumps(body).encode()


async def main(spec: dict, creds: dict, broker: str = "127.0.0.1", lab: str = "default") -> int:
    prefix, job_id = f"labd/v1/{lab}", f"ci-{uuid.uuid4().hex[:12]}"
    replies = f"{prefix}/replies/{creds['principal']}/{job_id}"
    host, _, port = broker.partition(":")
    async with aiomqtt.Client(
        host,
        int(port or 1883),
        username=creds["broker_username"],
        password=creds["broker_password"],
        # Random, never the job id: job ids are public (jobs/+/events) and a client that
        # connects with our id takes over our session and disconnects us.
        identifier=f"{creds['principal']}-{secrets.token_hex(12)}",
    ) as client:
        await client.subscribe(f"{prefix}/jobs/{job_id}/events", qos=1)
        await client.subscribe(replies, qos=1)
        request = {"schema_version": 2, "id": job_id, "reply_to": replies, "spec": spec}
        topic = f"{prefix}/jobs/submit"
        await client.publish(topic, signed(request, topic, creds), qos=1)
        seen: set[str] = set()  # delivery is at least once: drop duplicates by event id
        accepted = False
        async for message in client.messages:
            body = json.loads(message.payload)
            if message.topic.value == replies:  # labd's answer: accepted, or why not
                if not accepted and not body["accepted"]:
                    print("refused:", *body["problems"], sep="\n  ")
                    return 1
                accepted = True  # later answers (other hosts' `duplicate`) change nothing
                continue
            if body["event_id"] in seen:
                continue
            if body["kind"] == "rejected" and body["data"]["principal"] != creds["principal"]:
                continue  # another principal's refused submission naming our id, not ours
            seen.add(body["event_id"])
            print(f"#{body['seq']} {body['kind']}: {body['state']} {body['data']}")
            if body["kind"] in ("rejected", "finished"):
                return 0 if body["state"] == "succeeded" else 1
    return 1


if __name__ == "__main__":
    manifest = tomllib.loads(Path(sys.argv[1]).read_text())
    default = Path("~/.config/labd/credentials.toml").expanduser()
    credentials = tomllib.loads(Path(os.environ.get("LABD_CREDENTIALS", default)).read_text())
    sys.exit(asyncio.run(main(manifest, credentials, *sys.argv[2:])))
