from __future__ import annotations

from pathlib import Path

import pytest

from labd.errors import InvalidSpec
from labd.model import JobState, can_move
from labd.model.manifest import load_manifest, parse_spec

EXAMPLES = Path(__file__).parents[3] / "examples"


def problems(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "m.toml"
    path.write_text(text)
    with pytest.raises(InvalidSpec) as caught:
        load_manifest(path)
    return caught.value.problems


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.toml")), ids=lambda p: p.name)
def test_every_example_manifest_is_valid(path: Path) -> None:
    assert load_manifest(path).suite


def test_bad_manifests_are_refused_naming_file_key_and_reason(tmp_path: Path) -> None:
    base = 'suite = "s"\ntest = "t"\nscenario = "command"\n'
    assert problems(tmp_path, base + "iterations = 0\n") == [
        "m.toml: iterations: input should be greater than or equal to 1, got 0"
    ]
    assert problems(tmp_path, base + "iteratons = 5\n") == [
        "m.toml: iteratons: unknown key (did you mean 'iterations'?)"
    ]
    assert problems(tmp_path, base + "[device]\nplatfrom = 'x'\n") == [
        "m.toml: device.platfrom: unknown key (did you mean 'platform'?)"
    ]
    (syntax,) = problems(tmp_path, base + "iterations = = 3\n")
    assert syntax.startswith("m.toml: not valid TOML:") and "line 4" in syntax
    assert problems(tmp_path, 'test = "t"\nscenario = "c"\n') == ["m.toml: suite: field required"]


def test_state_machine_allows_cancel_from_every_live_state_and_nothing_after_the_end() -> None:
    for state in (JobState.QUEUED, JobState.LEASED, JobState.RUNNING):
        assert can_move(state, JobState.CANCELLED)
    for end in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.TIMED_OUT):
        assert not any(can_move(end, other) for other in JobState)
    assert not can_move(JobState.QUEUED, JobState.SUCCEEDED)


def test_a_manifest_over_the_size_limit_is_refused_in_one_line(tmp_path: Path) -> None:
    # It was read whole: `labd submit /dev/zero` took all the memory there was.
    from labd.model.manifest import MANIFEST_LIMIT

    base = 'suite = "s"\ntest = "t"\nscenario = "command"\n'
    path = tmp_path / "m.toml"
    path.write_text(base + "#" * (MANIFEST_LIMIT - len(base) - 1) + "\n")
    assert load_manifest(path).suite == "s"  # exactly the limit: read
    path.write_text(base + "#" * (MANIFEST_LIMIT - len(base)) + "\n")
    with pytest.raises(InvalidSpec) as caught:
        load_manifest(path)
    assert caught.value.problems == [f"{path}: larger than 1 MiB, the limit for a manifest"]


def test_a_bad_name_is_told_the_rule_and_nan_is_called_not_a_number() -> None:
    """A tester was shown the regular expression for a bad test name (an --id got the rule in
    words), and "less than or equal to 604800, got nan" for a timeout of nan."""
    spec = {"suite": "s", "test": "bad name!", "scenario": "command", "timeout_s": float("nan")}
    with pytest.raises(InvalidSpec) as refused:
        parse_spec({**spec, "params": {"command": ["true"]}}, "m.toml")
    assert refused.value.problems == [
        "m.toml: test: not a name: letters, digits and _ . @ : - only, starting with a letter, "
        "digit or _, at most 128 characters, got 'bad name!'",
        "m.toml: timeout_s: not a number (NaN), got nan",
    ]


@pytest.mark.parametrize("depth", [70, 5000])
def test_a_manifest_nested_too_deep_is_refused_here_naming_the_limit(
    tmp_path: Path, depth: int
) -> None:
    """Over MQTT labd refuses it unread (no answer; the CLI said labd was not running), and
    5,000 levels crashed the CLI in tomllib with a RecursionError (a re-tester's finds)."""
    path = tmp_path / "deep.toml"
    path.write_text(
        'suite = "s"\ntest = "t"\nscenario = "command"\n[params]\ncommand = ["true"]\n'
        f"x = {'[' * depth}{']' * depth}\n"
    )
    with pytest.raises(InvalidSpec) as refused:
        load_manifest(path)
    assert refused.value.problems == ["deep.toml: arrays or tables nested more than 64 levels deep"]
