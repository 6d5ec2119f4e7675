"""Jobs running side by side take run_as accounts of their own, while there are enough."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from labd.config import Settings
from labd.model import Policy, RunAs
from labd.scheduler.accounts import Accounts

A, B = RunAs("job-a", 2001, 2001, "/"), RunAs("job-b", 2002, 2002, "/")
POOL = Policy(run_as=A, accounts=(A, B))


def test_each_running_job_gets_an_account_no_other_holds_and_the_longest_free_next() -> None:
    accounts = Accounts()
    assert accounts.take("j1", POOL).run_as == A
    assert accounts.take("j2", POOL).run_as == B
    accounts.give_back("j2")
    accounts.give_back("j1")
    # b was given back first: free longest, it goes first (a's stragglers meet no new job).
    assert accounts.take("j3", POOL).run_as == B
    assert accounts.take("j4", POOL).run_as == A


def test_a_job_beyond_the_accounts_shares_one_and_says_so() -> None:
    accounts = Accounts()
    accounts.take("j1", POOL)
    accounts.take("j2", POOL)
    with capture_logs() as logs:
        shared = accounts.take("j3", POOL).run_as
    assert shared == A
    [warning] = logs
    assert "shares one" in warning["event"] and warning["with_jobs"] == ["j1"]


def test_one_account_is_every_jobs() -> None:
    one = Policy(run_as=A, accounts=(A,))
    accounts = Accounts()
    assert accounts.take("j1", one) is one and accounts.take("j2", one) is one


def test_the_fingerprint_names_the_accounts_not_the_jobs_own() -> None:
    # Two runs of a test compare whichever account each was given.
    assert POOL.for_job(A).run_as_record() == POOL.for_job(B).run_as_record()
    assert "job-a" in POOL.run_as_record() and "job-b" in POOL.run_as_record()


@pytest.mark.parametrize(
    ("run_as", "error"),
    [
        ([], "name at least one account"),
        (["nobody", "root"], "never run as root"),
        (["nobody", "nobody"], "named twice"),
    ],
)
def test_a_bad_list_of_accounts_is_refused(run_as: list[str], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        Settings.model_validate({"policy": {"run_as": run_as}})


def test_two_names_of_one_account_are_refused() -> None:
    with pytest.raises(ValueError, match="same account"):
        Policy.resolve([], "/usr/bin", [], ["nobody", "65534"], euid=0)
    assert len(Policy.resolve([], "/usr/bin", [], ["nobody", "daemon"], euid=0).accounts) == 2
