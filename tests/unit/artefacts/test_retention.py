"""Which jobs' artefacts the limits remove: by age, by a suite's size, by the host's size,
oldest first, never a job that may still write."""

from __future__ import annotations

from labd.artefacts import JobFolder, plan
from labd.artefacts.retention import DAY, MB
from labd.config import ArtefactSettings

NOW = 1_000_000_000.0


def folder(job_id: str, suite: str, days_ago: float, mb: float, finished: bool = True) -> JobFolder:
    return JobFolder(job_id, suite, NOW - days_ago * DAY, int(mb * MB), finished)


def settings(**values: object) -> ArtefactSettings:
    return ArtefactSettings.model_validate(values)


def removed(folders: list[JobFolder], s: ArtefactSettings) -> list[str]:
    return [r.job_id for r in plan(folders, s.limits, s.host_max_total_mb, NOW)]


def test_age_limit_with_a_suites_own_value() -> None:
    folders = [folder("a", "web", 40, 1), folder("b", "web", 10, 1), folder("c", "boot", 40, 1),
               folder("d", "boot", 100, 1), folder("e", "web", 50, 1, finished=False)]  # fmt: skip
    s = settings(max_age_days=30, suites={"boot": {"max_age_days": 90}})
    assert removed(folders, s) == ["d", "a"]  # oldest first; e may still write: never removed


def test_zero_means_no_limit() -> None:
    folders = [folder("a", "web", 4000, 5000)]
    assert removed(folders, settings(max_age_days=0, host_max_total_mb=0)) == []


def test_a_suite_over_its_size_loses_its_oldest_jobs_first() -> None:
    folders = [folder("new", "web", 1, 40), folder("old", "web", 3, 40),
               folder("mid", "web", 2, 40), folder("other", "boot", 9, 500)]  # fmt: skip
    s = settings(max_age_days=0, host_max_total_mb=0, suites={"web": {"max_total_mb": 90}})
    plans = plan(folders, s.limits, 0, NOW)
    assert [r.job_id for r in plans] == ["old"]
    assert plans[0].reason == "suite web over 90 MB" and round(plans[0].age_days) == 3


def test_the_host_limit_takes_the_oldest_whatever_the_suite() -> None:
    folders = [folder("w1", "web", 5, 30), folder("b1", "boot", 4, 30),
               folder("w2", "web", 3, 30), folder("run", "web", 9, 30, finished=False)]  # fmt: skip
    # 120 MB on disk, 70 allowed: the running job counts, but cannot go.
    assert removed(folders, settings(max_age_days=0, host_max_total_mb=70)) == ["w1", "b1"]


def test_steps_do_not_remove_a_job_twice() -> None:
    folders = [folder("a", "web", 40, 60), folder("b", "web", 1, 60)]
    s = settings(max_age_days=30, host_max_total_mb=50, suites={"web": {"max_total_mb": 50}})
    assert removed(folders, s) == ["a", "b"]
