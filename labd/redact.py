"""One place that decides what is a secret, for configuration output and logs alike."""

from __future__ import annotations

import re
from collections.abc import Iterable

MASK = "**********"
# A shorter value cannot be masked in text: "on" or "1" occur in any message, and masking every
# occurrence would garble the text and point at the value. Such values are shown as they are.
MIN_MASKABLE = 4
_SECRET_NAME = re.compile(r"(password|passwd|secret|token|credential|api_key)", re.IGNORECASE)
# Long runs of key-like characters: base64 keys, bearer tokens, hex digests.
_TOKEN_LIKE = re.compile(r"[A-Za-z0-9_\-+/=]{32,}")
# user:password@ after a scheme; not host:port/path@..., where "@" is in the path (a URL's
# port is digits ended by its path, query or fragment: "http://h:8000/users/@me").
_URL_PASSWORD = re.compile(
    r"(?P<scheme>[a-z][a-z0-9+.-]*://[^:/@\s]+:)(?!\d{1,5}[/?#])(?P<pw>[^@\s]+)(?=@)"
)


def is_secret_name(name: str) -> bool:
    """True when a key with this name holds a secret (password, token, ...)."""
    return bool(_SECRET_NAME.search(name))


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """Text with passwords inside URLs and every given secret value masked (the longest
    first: a secret inside another must not leave the rest of the longer one)."""
    text = _URL_PASSWORD.sub(lambda m: m["scheme"] + MASK, text)
    for secret in sorted(secrets, key=len, reverse=True):
        if secret:
            text = text.replace(secret, MASK)
    return text


def mask_token_like(text: str) -> str:
    """Text with every long key-like string masked: for messages that may quote a secret labd
    does not know is one (an error quoting a line of a configuration file)."""
    return _TOKEN_LIKE.sub(MASK, redact_text(text))
