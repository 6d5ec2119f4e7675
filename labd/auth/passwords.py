"""Broker passwords hashed the way Mosquitto's passwd file holds them ($7$: PBKDF2-SHA512),
so one hash in labd's configuration serves Mosquitto and the embedded broker alike."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os

ITERATIONS = 101  # mosquitto_passwd's own choice for $7$
SALT_BYTES = 12


def hash_password(password: str, salt: bytes | None = None) -> str:
    salt = os.urandom(SALT_BYTES) if salt is None else salt
    digest = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, ITERATIONS, 64)
    return f"$7${ITERATIONS}${base64.b64encode(salt).decode()}${base64.b64encode(digest).decode()}"


def check_password(password: str, hashed: str) -> bool:
    """Whether `password` matches a $7$ hash (False for any other or a malformed hash)."""
    try:
        _, scheme, rounds, salt, digest = hashed.split("$")
        if scheme != "7":
            return False
        expected = base64.b64decode(digest, validate=True)
        actual = hashlib.pbkdf2_hmac(
            "sha512", password.encode(), base64.b64decode(salt, validate=True), int(rounds), 64
        )
    except ValueError:
        return False
    return hmac.compare_digest(actual, expected)
