"""Sessions per principal: one principal signing in again and again closes only its own
sessions, and signs in at most SIGN_INS_PER_MINUTE times a minute."""

from __future__ import annotations

import pytest

from labd.console import access


@pytest.fixture
def now(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    clock = [1000.0]
    monkeypatch.setattr(access.time, "monotonic", lambda: clock[0])
    return clock


def test_one_principal_signing_in_again_and_again_signs_no_one_else_out(now: list[float]) -> None:
    """1,001 viewer sign-ins evicted the longest idle sessions of all: the admin's got 401."""
    sessions = access.Sessions()
    admin = sessions.open("admin")
    viewer = [sessions.open("viewer")]
    for _ in range(1000):
        now[0] += 6.1  # within the rate limit: only the cap is at work
        viewer.append(sessions.open("viewer"))
    assert sessions.get(admin) is not None
    alive = [sid for sid in viewer if sessions.get(sid) is not None]
    assert alive == viewer[-access.SESSIONS_PER_PRINCIPAL :]


def test_a_principals_least_recently_used_session_goes_first(now: list[float]) -> None:
    sessions = access.Sessions()
    opened = [sessions.open("p") for _ in range(access.SESSIONS_PER_PRINCIPAL // 2)]
    now[0] += 61
    opened += [sessions.open("p") for _ in range(access.SESSIONS_PER_PRINCIPAL // 2)]
    assert sessions.get(opened[0]) is not None  # used just now: the second oldest is idlest
    now[0] += 61
    sessions.open("p")
    assert sessions.get(opened[0]) is not None
    assert sessions.get(opened[1]) is None


def test_sign_ins_are_limited_per_principal_and_minute(now: list[float]) -> None:
    sessions = access.Sessions()
    for _ in range(access.SIGN_INS_PER_MINUTE):
        sessions.open("viewer")
        now[0] += 2
    with pytest.raises(access.TooManySignIns) as refused:
        sessions.open("viewer")
    assert refused.value.principal == "viewer"
    # The first of the ten left 20 s ago: it leaves the minute in 40 s (Retry-After).
    assert refused.value.retry_after_s == 40
    assert str(refused.value) == (
        "principal 'viewer' signed in 10 times in the last minute (limit 10); try again in 40 s"
    )
    assert sessions.get(sessions.open("admin")) is not None  # others are not held up
    now[0] += 61
    assert sessions.get(sessions.open("viewer")) is not None
