"""Find, read and validate the configuration: TOML file, then `LABD_<SECTION>__<KEY>` overrides.

Every problem is reported as `<source>: <key.path>: <reason>`, where the source is the file or
the environment variable the bad value came from, so an operator knows exactly what to edit;
a check across keys of a section names each source of that section's values.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_origin

from pydantic import BaseModel, ValidationError

from labd.config.models import Settings
from labd.errors import ConfigError
from labd.textfile import FileTooLarge, MiB, read_limited
from labd.validation import describe_errors, did_you_mean

ENV_PREFIX = "LABD_"
ENV_SEPARATOR = "__"
SEARCH_PATH = (Path("labd.toml"), Path("/etc/labd/labd.toml"))
CONFIG_LIMIT = 1 * MiB  # the full example is under 20 KiB; a larger file is refused


@dataclass(frozen=True)
class LoadedConfig:
    """Validated settings and where they came from (None: built-in defaults)."""

    settings: Settings
    path: Path | None


def env_overrides(environ: Mapping[str, str]) -> list[str]:
    """The `LABD_<SECTION>__<KEY>` variables set: what changes the file's values."""
    return sorted(n for n in environ if n.startswith(ENV_PREFIX) and ENV_SEPARATOR in n)


def find_config_file(explicit: str | os.PathLike[str] | None) -> Path | None:
    """The file to read: the explicit one, else $LABD_CONFIG, else the first that exists."""
    if explicit:
        return Path(explicit)
    if from_env := os.environ.get("LABD_CONFIG"):
        return Path(from_env)
    return next((p for p in SEARCH_PATH if p.is_file()), None)


def load_config(
    explicit: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> LoadedConfig:
    """Load and validate the configuration; raise ConfigError naming every problem."""
    environ = os.environ if environ is None else environ
    path = find_config_file(explicit)
    data = _read_toml(path) if path else {}
    source = path.name if path else "defaults"
    origins = dict.fromkeys(_leaf_paths(data), source)
    problems = _apply_env(data, environ, origins)
    try:
        settings = Settings.model_validate(data)
    except ValidationError as e:
        problems += describe_errors(e, Settings, source, origins)
    if problems:
        raise ConfigError(problems)
    return LoadedConfig(settings, path)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        text = read_limited(path, CONFIG_LIMIT, "a configuration file")
    except FileTooLarge as e:
        raise ConfigError([str(e)]) from None
    except FileNotFoundError:
        raise ConfigError([f"{path}: no such file"]) from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError([f"{path}: cannot read: {e}"]) from e
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError([f"{path.name}: not valid TOML: {e}"]) from e


def _apply_env(
    data: dict[str, Any], environ: Mapping[str, str], origins: dict[tuple[str, ...], str]
) -> list[str]:
    """Overlay LABD_SECTION__KEY variables onto data; return problems with unknown names."""
    problems = []
    for name in sorted(environ):
        if not name.startswith(ENV_PREFIX):
            continue
        if ENV_SEPARATOR not in name:
            if one_underscore := _single_separator(name):
                problems.append(f"{name}: {one_underscore}")
            continue
        path = tuple(part.lower() for part in name[len(ENV_PREFIX) :].split(ENV_SEPARATOR))
        if unknown := _unknown_key(path):
            problems.append(f"{name}: {unknown}")
            continue
        node = data
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = _parse_env_value(environ[name])
        for replaced in [p for p in origins if p[: len(path)] == path]:
            del origins[replaced]  # a table given whole replaces the file's
        origins[path] = name
    return problems


def _single_separator(name: str) -> str | None:
    """What is wrong with `name` when it reads as a section's key with one underscore for
    two (LABD_HTTP_PORT): ignored, it would leave the setting silently as it was. Variables
    of labd's own (LABD_CONFIG, LABD_API_URL, ...) name no section."""
    rest = name[len(ENV_PREFIX) :].lower()
    for section, field in Settings.model_fields.items():
        if not rest.startswith(section + "_"):
            continue
        if section == "drivers":
            return "not read: drivers are set in the configuration file only"
        key = rest[len(section) + 1 :]
        model = field.annotation
        if isinstance(model, type) and issubclass(model, BaseModel) and key in model.model_fields:
            right = ENV_PREFIX + ENV_SEPARATOR.join((section, key)).upper()
            return f"not read: a section and its key are joined by two underscores: {right}"
        return (
            f"not read: a section and its key are joined by two underscores "
            f"({ENV_PREFIX}{section.upper()}{ENV_SEPARATOR}KEY)"
        )
    return None


def _leaf_paths(data: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The key path of every value in the file that is not itself a table."""
    paths = []
    for key, value in data.items():
        if isinstance(value, dict):
            paths += _leaf_paths(value, (*prefix, key))
        else:
            paths.append((*prefix, key))
    return paths


def _parse_env_value(raw: str) -> Any:
    # Lists and tables are written as JSON; everything else stays a string for pydantic to coerce.
    if raw[:1] in "[{":
        try:
            return json.loads(raw)
        except ValueError:
            pass  # not JSON after all: let validation report the string as it is
    return raw


def _unknown_key(path: tuple[str, ...]) -> str | None:
    model: type[BaseModel] | None = Settings
    annotation: Any = None
    for depth, part in enumerate(path):
        if model is None:
            key = ".".join(path[:depth])
            if depth == 1:  # `drivers`: the one top-level key that is not a section
                return f"{key}: set in the configuration file only, not from the environment"
            if get_origin(annotation) is dict:
                variable = ENV_PREFIX + ENV_SEPARATOR.join(path[:depth]).upper()
                return f"{key} takes no sub-keys: set {variable} to the whole table as JSON"
            return f"{key} takes no sub-keys"
        fields = model.model_fields
        if part not in fields:
            return f"{'.'.join(path[: depth + 1])}: unknown key{did_you_mean(part, fields)}"
        annotation = fields[part].annotation
        model = (
            annotation
            if isinstance(annotation, type) and issubclass(annotation, BaseModel)
            else None
        )
    return None
