"""One grammar for the names labd gives things: jobs, devices, labs, hosts and principals.

A name travels as an MQTT topic level, a file name under the state directory, a URL path
segment and a log field, so it may hold only characters that mean nothing special in any of
them: letters, digits and `_ . @ : -`, starting with a letter, digit or `_` (so never `.`,
`..` or an option-like `-x`), at most 128 characters. MQTT's wildcards `#` and `+`, `/`,
`%`, `?`, spaces, control characters and anything outside ASCII are refused with the rule
named, at every way in (MQTT, API, CLI, manifest, configuration).
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

from labd.validation import PATTERN_RULES

MAX_LENGTH = 128
_CORE = r"[A-Za-z0-9_][A-Za-z0-9_.@:-]{0,127}"
ID_PATTERN = rf"^{_CORE}$"
OPTIONAL_ID_PATTERN = rf"^(?:{_CORE})?$"  # a name, or empty for "choose one for me"
_ID = re.compile(ID_PATTERN)

RULE = (
    "letters, digits and _ . @ : - only, starting with a letter, digit or _, "
    f"at most {MAX_LENGTH} characters"
)
PATTERN_RULES[ID_PATTERN] = RULE


# A signing key's id (a principal's secret_keys entry, a signed message's key_id).
KEY_ID_PATTERN = r"[A-Za-z0-9_.-]{1,64}"


def key_id_problem(key_id: str) -> str | None:
    """Why `key_id` cannot name a key, or None when it can."""
    if re.fullmatch(KEY_ID_PATTERN, key_id):
        return None
    return f"key id {key_id!r} is not {KEY_ID_PATTERN} (letters, digits, '_', '.', '-'; 1 to 64)"


def id_problem(value: str, what: str = "id") -> str | None:
    """Why `value` is not a valid name, or None when it is (for messages that name the rule)."""
    if _ID.fullmatch(value):
        return None
    if not value:
        return f"{what} is empty"
    if len(value) > MAX_LENGTH:
        return f"{what} is {len(value)} characters long (at most {MAX_LENGTH})"
    bad = next((c for c in value if not re.fullmatch(r"[A-Za-z0-9_.@:-]", c)), None)
    if bad is not None:
        return f"{what} {_shown(value)} holds {_shown(bad)}; allowed: {RULE}"
    return f"{what} {_shown(value)} starts with {value[0]!r}; allowed: {RULE}"


def check_id(value: str, what: str = "id") -> str:
    """`value` if it is a valid name; else ValueError naming the rule."""
    if (problem := id_problem(value, what)) is not None:
        raise ValueError(problem)
    return value


def _shown(text: str) -> str:
    # ascii(): a lone surrogate or a NUL must never reach a log line, a topic or a terminal raw.
    return ascii(text if len(text) <= 40 else text[:40] + "...")


def _validate(value: str) -> str:
    return check_id(value, "name")


Identifier = Annotated[str, AfterValidator(_validate)]
"""A pydantic field type: a name that satisfies the grammar above."""
