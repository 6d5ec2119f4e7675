"""End-to-end signatures of MQTT write messages (brokers do not tell a subscriber who published).

A signed message is the request's JSON object with an `auth` member:

    {"auth": {"principal": "ci", "key_id": "k1", "time": 1795000000.25,
              "nonce": "<random>", "signature": "<base64url>"}, ...the request...}

`signature` is HMAC-SHA256, under the principal's key `key_id`, of

    b"labd-mqtt-v1\\n" + topic + b"\\n" + JCS(message without auth.signature)

where JCS is the JSON Canonicalization Scheme (RFC 8785), which every language has a library
for. The topic is signed so a cancel for one job cannot be replayed onto another's topic; the
time and nonce so a captured message cannot be used again (see `verify`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import math
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import rfc8785

from labd.auth.canonical import canonical
from labd.auth.principals import Principal, Principals
from labd.errors import AuthError
from labd.model import KEY_ID_PATTERN

SCHEME = b"labd-mqtt-v1"
NONCE_BYTES = 16
# The auth member's limits, here and in the message model (labd.mqtt.messages.Signature): a
# nonce verify() let through is one the ledger can record (its column holds 64).
PRINCIPAL_MAX = 128
NONCE_MIN, NONCE_MAX = 8, 64
SIGNATURE_MAX = 128


@dataclass(frozen=True)
class Signed:
    """A message whose signature held: who sent it, and the nonce to record."""

    principal: Principal
    nonce: str
    time: float


def signing_input(topic: str, message: Mapping[str, Any]) -> bytes:
    auth = dict(message.get("auth") or {})
    auth.pop("signature", None)
    unsigned = {**message, "auth": auth}
    try:
        form = canonical(unsigned)
    except (rfc8785.CanonicalizationError, TypeError, ValueError) as e:
        raise AuthError("malformed", f"message cannot be canonicalised (RFC 8785): {e}") from e
    return SCHEME + b"\n" + topic.encode() + b"\n" + form


def _mac(key: bytes, data: bytes) -> str:
    digest = hmac.new(key, data, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def sign(
    message: Mapping[str, Any],
    topic: str,
    principal: str,
    key_id: str,
    key: bytes,
    now: float | None = None,
    nonce: str | None = None,
) -> dict[str, Any]:
    """`message` with its `auth` member, ready to publish on `topic`."""
    auth = {
        "principal": principal,
        "key_id": key_id,
        "time": time.time() if now is None else now,
        "nonce": nonce or base64.urlsafe_b64encode(os.urandom(NONCE_BYTES)).rstrip(b"=").decode(),
    }
    body = {**message, "auth": auth}
    return {**body, "auth": {**auth, "signature": _mac(key, signing_input(topic, body))}}


def verify(
    message: Mapping[str, Any],
    topic: str,
    principals: Principals,
    max_age_s: float,
    clock_skew_s: float,
    now: float | None = None,
) -> Signed:
    """Who signed `message` for `topic`; AuthError with the reason when nobody valid did.

    The nonce is returned, not recorded: the caller records it once the message is acted on.
    """
    auth = message.get("auth")
    if not isinstance(auth, dict):
        raise AuthError("unsigned", "message is not signed (no auth member)")
    name, key_id = auth.get("principal"), auth.get("key_id")
    sent, nonce, signature = auth.get("time"), auth.get("nonce"), auth.get("signature")
    shapes = (
        (name, "principal", 1, PRINCIPAL_MAX),
        (key_id, "key_id", 1, 64),
        (nonce, "nonce", NONCE_MIN, NONCE_MAX),
        (signature, "signature", 1, SIGNATURE_MAX),
    )
    for value, field, shortest, longest in shapes:
        if not isinstance(value, str) or not shortest <= len(value) <= longest:
            raise AuthError(
                "malformed",
                f"auth.{field} is missing or not a string of {shortest} to {longest} characters",
            )
    if isinstance(sent, bool) or not isinstance(sent, int | float):
        raise AuthError("malformed", "auth.time is missing or not a number (Unix seconds)")
    try:
        sent = float(sent)  # an integer of 400 digits does not fit
    except OverflowError:
        sent = math.inf
    if not math.isfinite(sent):
        raise AuthError("malformed", "auth.time is out of range (Unix seconds)")
    assert isinstance(name, str) and isinstance(key_id, str)
    assert isinstance(nonce, str) and isinstance(signature, str)
    if not re.fullmatch(KEY_ID_PATTERN, key_id):
        raise AuthError("malformed", f"auth.key_id is not {KEY_ID_PATTERN}")
    principal = principals.get(name)
    if principal is None:
        raise AuthError("unknown_principal", f"principal {name!r} is not admitted by this lab")
    key = principal.keys.get(key_id)
    if key is None:
        raise AuthError("unknown_key", f"principal {name!r} has no key {key_id!r}")
    if not hmac.compare_digest(_mac(key, signing_input(topic, message)), signature):
        raise AuthError("bad_signature", f"signature of {name!r} (key {key_id!r}) does not match")
    # Freshness is checked only after the signature: an attacker cannot probe our clock.
    now = time.time() if now is None else now
    if sent > now + clock_skew_s:
        raise AuthError("future", f"message time is {_seconds(sent - now)} s in the future")
    if now - sent > max_age_s:
        age = _seconds(now - sent)
        raise AuthError("expired", f"message is {age} s old (limit {max_age_s:g} s)")
    return Signed(principal, nonce, sent)


def _seconds(span: float) -> str:
    """A span in whole seconds, or in %g beyond three years (`1e+300`, not 301 digits)."""
    return f"{span:.0f}" if abs(span) < 1e8 else f"{span:.3g}"
