"""`labd devices list|show|drain|enable|maintenance`."""

from __future__ import annotations

import argparse
import json
from urllib.parse import quote

from labd.cli.client import Client
from labd.cli.text import shown


def _client(args: argparse.Namespace) -> Client:
    return Client.from_args(args)


def list_devices(args: argparse.Namespace) -> int:
    devices = _client(args).call("GET", "/devices")["devices"]
    if args.json:
        print(json.dumps({"devices": devices}, indent=2))
        return 0
    print(f"{'DEVICE':<24} {'PLATFORM':<9} {'STATE':<12} {'ADMIN':<12} HOST  (WHY)")
    for d in devices:
        reason = f"  ({d['reason']})" if d["reason"] else ""
        print(
            shown(
                f"{d['id']:<24} {d['platform']:<9} {d['state']:<12} {d['admin']:<12} "
                f"{d['host']}{reason}"
            )
        )
    return 0


def show(args: argparse.Namespace) -> int:
    device = _client(args).call("GET", f"/devices/{quote(args.id, safe='')}")["device"]
    if args.json:
        print(json.dumps({"device": device}, indent=2))
        return 0
    for key in (
        "id",
        "driver",
        "platform",
        "model",
        "os_version",
        "tags",
        "host",
        "state",
        "admin",
        "reason",
        "consecutive_failures",
        "job",
        "scenarios",
    ):
        value = device.get(key)
        if key == "scenarios" and value is not None:
            value = ", ".join(value) or "none"
        print(f"{key:<21} {shown(value if value not in ('', None) else '-')}")
    return 0


def admin(args: argparse.Namespace) -> int:
    path = f"/devices/{quote(args.id, safe='')}/{args.action}"
    device = _client(args).call("POST", path)["device"]
    if args.json:
        print(json.dumps({"device": device}, indent=2))
    else:
        print(shown(f"{device['id']}: {device['state']} (admin: {device['admin']})"))
    return 0
