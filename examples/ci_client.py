"""A CI system submits a job to labd over MQTT and waits for its verdict.

Usage: python examples/ci_client.py examples/host-python-startup.toml [host[:port]] [lab]
Exits 0 when the job succeeded, 1 otherwise.
"""

import asyncio
import json
import sys
import tomllib
import uuid
from pathlib import Path

import aiomqtt


async def main(spec: dict, broker: str = "127.0.0.1", lab: str = "default") -> int:
    prefix, job_id = f"labd/v1/{lab}", f"ci-{uuid.uuid4().hex[:12]}"
    host, _, port = broker.partition(":")
    async with aiomqtt.Client(host, int(port or 1883), identifier=job_id) as client:
        await client.subscribe(f"{prefix}/jobs/{job_id}/events", qos=1)
        request = {"schema_version": 1, "id": job_id, "sender": "ci", "spec": spec}
        await client.publish(f"{prefix}/jobs/submit", json.dumps(request), qos=1)
        seen: set[str] = set()  # delivery is at least once: drop duplicates by event id
        async for message in client.messages:
            event = json.loads(message.payload)
            if event["event_id"] in seen:
                continue
            seen.add(event["event_id"])
            print(f"#{event['seq']} {event['kind']}: {event['state']} {event['data']}")
            if event["kind"] in ("rejected", "finished"):
                return 0 if event["state"] == "succeeded" else 1
    return 1


if __name__ == "__main__":
    manifest = tomllib.loads(Path(sys.argv[1]).read_text())
    sys.exit(asyncio.run(main(manifest, *sys.argv[2:])))
