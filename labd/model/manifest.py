"""Test manifests: a TOML file holding one TestSpec."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from labd.errors import InvalidSpec
from labd.model.spec import TestSpec
from labd.textfile import FileTooLarge, MiB, read_limited
from labd.validation import TOO_DEEP, describe_errors, too_deep

MANIFEST_LIMIT = 1 * MiB  # a manifest is a few hundred bytes; anything near this is a mistake


def parse_spec(data: Any, source: str) -> TestSpec:
    """Validate plain data as a TestSpec; InvalidSpec names `source`, each key and reason."""
    try:
        return TestSpec.model_validate(data)
    except ValidationError as e:
        raise InvalidSpec(describe_errors(e, TestSpec, source)) from e


def load_manifest(path: Path) -> TestSpec:
    """Read and validate a manifest file."""
    try:
        text = read_limited(path, MANIFEST_LIMIT, "a manifest")
    except FileTooLarge as e:
        raise InvalidSpec([str(e)]) from None
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidSpec([f"{path}: cannot read: {e}"]) from e
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InvalidSpec([f"{path.name}: not valid TOML: {e}"]) from e
    except RecursionError:  # tomllib recurses into nested arrays and tables
        data = None
    if data is None or too_deep(data):  # what labd would refuse over MQTT and the API
        raise InvalidSpec([f"{path.name}: arrays or tables {TOO_DEEP}"])
    return parse_spec(data, path.name)
