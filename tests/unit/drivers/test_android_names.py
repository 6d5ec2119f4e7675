"""A job's Android names are names: app-launch, gestures and page-load refuse the same ones,
with the same words, before the job starts."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from labd_android.gesture_steps import GestureStep
from labd_android.gestures import GestureParams
from labd_android.launch import LaunchParams
from labd_android.pageload import PhonePageLoadParams

TAP = [GestureStep(kind="tap")]
REFUSED = {
    "a\x00b": r"'a\x00b' is not an Android activity",
    "A" * 5000: "activity is 5000 characters long (at most 255)",
    "--user 0 -n evil/.X": "'--user 0 -n evil/.X' is not an Android activity",
    ".Main\n": r"'.Main\n' is not an Android activity",
}


@pytest.mark.parametrize("activity", REFUSED)
def test_app_launch_and_gestures_refuse_the_same_activities(activity: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(REFUSED[activity])):
        LaunchParams(package="org.example.app", activity=activity)
    with pytest.raises(ValidationError, match=re.escape(REFUSED[activity])):
        GestureParams(activity=f"org.example.app/{activity}", steps=TAP)


@pytest.mark.parametrize("package", ["x; reboot", "-n", "org", "org.example\n", "ö.x"])
def test_every_scenario_refuses_the_same_packages(package: str) -> None:
    for make in (
        lambda: LaunchParams(package=package),
        lambda: GestureParams(activity=f"{package}/.Main", steps=TAP),
        lambda: GestureParams(url="https://example.org/", package=package, steps=TAP),
        lambda: PhonePageLoadParams(url="https://example.org/", package=package),
    ):
        with pytest.raises(ValidationError, match="is not an Android package name"):
            make()


def test_real_names_pass() -> None:
    assert LaunchParams(package="org.mozilla.fenix", activity=".App").activity == ".App"
    assert LaunchParams(package="com.a_b.c2", activity="com.a_b.c2.Main$Inner").package
    assert GestureParams(activity="org.example.list/.Main", steps=TAP).activity
    with pytest.raises(ValidationError, match="expected package/activity"):
        GestureParams(activity="org.example.list", steps=TAP)


def test_a_refusal_that_quotes_the_value_does_not_repeat_it() -> None:
    """`'x' is not an Android package name (like org.mozilla.fenix), got 'x'`: said twice."""
    from labd.model import TestSpec
    from labd.validation import describe_errors

    with pytest.raises(ValidationError) as caught:
        LaunchParams(package="x")
    (line,) = describe_errors(caught.value, LaunchParams, "job.toml")
    assert line == (
        "job.toml: package: value error, 'x' is not an Android package name "
        "(like org.mozilla.fenix)"
    )
    spec = {"suite": "s", "test": "t", "scenario": "app-launch", "iterations": "many"}
    with pytest.raises(ValidationError) as caught:
        TestSpec.model_validate(spec)
    (line,) = describe_errors(caught.value, TestSpec, "job.toml")
    assert line == "job.toml: iterations: input should be a valid integer, got 'many'"
