"""Names from outside labd, checked before they are used: a device's serial (adb lists
whatever a device or a TCP address calls itself) and the packages and activities a job
names. Every argument is quoted before it reaches a phone's shell, but a quoted `-n evil/.X`
is still an option to `am`, so a job's names must be names."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

from labd.sdk import OPTIONAL_ID_PATTERN

MAX_NAME = 255  # longer than any real package or class name
PACKAGE = re.compile(r"[A-Za-z][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)+")
# A class name, fully qualified or relative to the package (`.Main`); `Outer$Inner` nested.
ACTIVITY = re.compile(r"\.?[A-Za-z_][A-Za-z0-9_$]*(?:\.[A-Za-z_][A-Za-z0-9_$]*)*")
DEVICE_ID = re.compile(OPTIONAL_ID_PATTERN)


def shown(value: str | bytes, limit: int = 60) -> str:
    """`value` quoted, escaped (a NUL or a terminal escape never reaches a log raw) and cut."""
    return ascii(value[:limit]) + ("..." if len(value) > limit else "")


def _checked(value: str, pattern: re.Pattern[str], what: str, example: str) -> str:
    if len(value) > MAX_NAME:
        raise ValueError(f"{what} is {len(value)} characters long (at most {MAX_NAME})")
    if not pattern.fullmatch(value):
        raise ValueError(f"{shown(value)} is not an Android {what} (like {example})")
    return value


def package(value: str) -> str:
    """`value`, an Android package name or empty (none given); else ValueError saying why."""
    return _checked(value, PACKAGE, "package name", "org.mozilla.fenix") if value else value


def activity(value: str) -> str:
    """`value`, an activity's class name or empty (none given); else ValueError saying why."""
    return _checked(value, ACTIVITY, "activity", ".MainActivity") if value else value


def component(value: str) -> str:
    """`value`, package/activity or empty (none given); else ValueError saying why."""
    if value:
        name, slash, cls = value.partition("/")
        if not slash or not name or not cls:
            raise ValueError(f"{shown(value)}: expected package/activity")
        package(name)
        activity(cls)
    return value


Package = Annotated[str, AfterValidator(package)]
Activity = Annotated[str, AfterValidator(activity)]
Component = Annotated[str, AfterValidator(component)]


def serial_problem(serial: str) -> str | None:
    """Why labd cannot use `serial` as a device id (it is one: in topics, paths, URLs), or
    None when it can."""
    if serial and DEVICE_ID.fullmatch(serial):
        return None
    return f"serial {shown(serial)} is outside labd's device-id grammar {OPTIONAL_ID_PATTERN}"
