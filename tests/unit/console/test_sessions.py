"""The console's sessions and redirects: what a stolen or stale cookie and a crafted link get."""

from __future__ import annotations

import pytest

from labd.console import access, app
from labd.console.artefacts import changes
from labd.console.live import message
from labd.events import IterationDone, JobFinished


def test_a_session_lapses_when_idle_and_when_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(access.time, "monotonic", lambda: now[0])
    sessions = access.Sessions()
    sid = sessions.open("ci")
    found = sessions.get(sid)
    assert found is not None and found.principal == "ci" and len(found.csrf) >= 24
    now[0] += access.SESSION_IDLE_S - 1
    assert sessions.get(sid) is not None  # use keeps it alive
    now[0] += access.SESSION_IDLE_S + 1
    assert sessions.get(sid) is None
    other = sessions.open("ci")
    sessions.close(other)
    assert sessions.get(other) is None and sessions.get("made-up") is None


def test_whoever_holds_a_session_learns_it_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    """Signing out, expiry and eviction each tell `on_close` (a live stream ends on it); a
    stream asking `alive` does not keep the session alive."""
    now = [1000.0]
    monkeypatch.setattr(access.time, "monotonic", lambda: now[0])
    sessions, ended = access.Sessions(), []
    sessions.on_close.append(ended.append)
    signed_out, idle = sessions.open("a"), sessions.open("a")
    sessions.close(signed_out)
    sessions.close(signed_out)  # told once
    assert ended == [signed_out]
    now[0] += access.SESSION_IDLE_S - 1
    assert sessions.alive(idle)
    now[0] += 2  # `alive` did not count as a use: idle past the limit now
    assert not sessions.alive(idle) and ended == [signed_out, idle]
    first = sessions.open("b")
    for _ in range(access.SESSIONS_PER_PRINCIPAL):
        now[0] += 7  # slower than the sign-in rate limit
        sessions.open("b")
    assert ended[-1] == first


def test_the_oldest_idle_session_goes_when_there_are_too_many(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The global cap, a last resort once many principals each hold their share."""
    monkeypatch.setattr(access, "MAX_SESSIONS", 5)
    sessions = access.Sessions()
    first = sessions.open("a")
    for name in "bcdef":
        sessions.open(name)
    assert sessions.get(first) is None


@pytest.mark.parametrize(
    ("target", "goes_to"),
    [
        ("/console/jobs/x", "/console/jobs/x"),
        ("https://evil.example/", "/console/"),
        ("//evil.example/console/", "/console/"),
        ("/console/\\evil", "/console/"),
        ("/metrics", "/console/"),
        ("", "/console/"),
    ],
)
def test_sign_in_sends_you_only_inside_the_console(target: str, goes_to: str) -> None:
    assert app._local(target) == goes_to


def test_the_filmstrip_keeps_the_frames_where_progress_changed() -> None:
    progress = [0.0, 0.0, 0.3, 0.3, 0.3, 0.9, 1.0, 1.0]
    frames = [{"t_ms": 10.0 * k, "progress": p} for k, p in enumerate(progress)]
    assert [k for k, _, _ in changes(frames)] == [0, 2, 5, 6]
    many = [{"t_ms": float(k), "progress": k / 100} for k in range(101)]
    thinned = changes(many)
    assert len(thinned) == 24 and thinned[-1][0] == 100


def test_live_events_say_which_job_moved() -> None:
    done = IterationDone(
        job_id="j", device_id="d", attempt=1, index=4, warmup=False, values={}, error=""
    )
    assert message(done) == b'event: iteration\ndata: {"job": "j", "done": 5}\n\n'
    finished = JobFinished(
        job_id="j", state="failed", error="x", suite="s", test="t", device_id="d"
    )
    assert message(finished) == b'event: finished\ndata: {"job": "j", "state": "failed"}\n\n'
