"""The accounts jobs run as: where `policy.run_as` lists several, each job running on this host
takes one no other running job holds, so jobs side by side cannot read each other's
environment through /proc, nor signal or trace each other's programs."""

from __future__ import annotations

import structlog

from labd.model import Policy, RunAs

log = structlog.get_logger("labd.scheduler")


class Accounts:
    """Which running job holds which account."""

    def __init__(self) -> None:
        self.held: dict[str, RunAs] = {}  # by job id
        self._given_back: dict[int, int] = {}  # uid: when its last job gave it back (a count)
        self._count = 0

    def take(self, job_id: str, policy: Policy) -> Policy:
        """The policy `job_id` runs under: with an account of its own where the policy lists
        several (the one free longest, so a finished job's last stragglers meet no new job);
        when every one is held, the one the fewest jobs hold, said in a warning."""
        if len(policy.accounts) < 2:
            return policy
        in_use = list(self.held.values())
        free = [a for a in policy.accounts if a not in in_use]
        if free:
            account = min(free, key=lambda a: self._given_back.get(a.uid, -1))
        else:
            account = min(policy.accounts, key=in_use.count)
            log.warning(
                "every run_as account is held by a running job; this job shares one: list more "
                "accounts in policy.run_as",
                job_id=job_id,
                account=account.name,
                with_jobs=sorted(j for j, a in self.held.items() if a == account),
            )
        self.held[job_id] = account
        return policy.for_job(account)

    def give_back(self, job_id: str) -> None:
        if (account := self.held.pop(job_id, None)) is not None:
            self._count += 1
            self._given_back[account.uid] = self._count
