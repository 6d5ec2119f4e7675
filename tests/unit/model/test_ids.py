"""One grammar for names: whatever string comes in, a name either passes and is safe as an
MQTT topic level, a file name, a URL segment and a log field, or is refused with the rule."""

from __future__ import annotations

from urllib.parse import quote

from hypothesis import given, settings
from hypothesis import strategies as st

from labd.model import check_id, id_problem
from labd.model.ids import RULE
from labd.mqtt.topics import Topics

hostile = st.text(max_size=200) | st.sampled_from(
    ["build#123", "a+b", "a/b", "\ud800", "x\x00y", "..", ".", "-rf", "x" * 10_000, "pr#42", ""]
)


@settings(max_examples=2000)
@given(hostile)
def test_a_name_is_safe_everywhere_or_refused_with_the_rule(name: str) -> None:
    problem = id_problem(name, "job id")
    if problem is None:
        assert check_id(name) == name
        name.encode("utf-8")  # no lone surrogate
        assert name.isascii() and name.isprintable() and 0 < len(name) <= 128
        assert not any(c in name for c in "#+/\\%?\x00 ")
        assert name not in (".", "..") and not name.startswith(("-", "."))
        assert Topics("labd/v1/lab").job_events(name).split("/")[4] == name  # one level
        assert quote(name, safe="@:") == name  # a URL path segment as it is
    else:
        assert problem.startswith("job id")
        assert RULE in problem or "characters long" in problem or problem == "job id is empty"
        problem.encode("utf-8")  # the reason itself is printable anywhere
        assert "\x00" not in problem
