"""The small exception tree every labd component raises from.

Each error maps to one of the documented exit codes, so the CLI can turn any of them into a
one-line message and the right status without a traceback.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_NEGATIVE = 1  # a negative verdict, e.g. a regression was found
EXIT_USAGE = 2  # usage or configuration error
EXIT_RUNTIME = 3  # runtime failure


class LabdError(Exception):
    """Base of every error labd raises on purpose."""

    exit_code = EXIT_RUNTIME


class ConfigError(LabdError):
    """The configuration (file, environment or value) is invalid. `problems` lists each one."""

    exit_code = EXIT_USAGE

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


class UsageError(LabdError):
    """The command line or an input file given to it is wrong."""

    exit_code = EXIT_USAGE


class InvalidSpec(UsageError):
    """A test manifest or job request is invalid; `problems` names each key and reason."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


class AuthError(LabdError):
    """A request was refused for who sent it: `reason` is a short stable code (for metrics),
    the message says what was wrong."""

    exit_code = EXIT_USAGE

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        super().__init__(message)


class InfrastructureError(LabdError):
    """The device or its driver failed (lost, unreachable, crashed): worth a retry elsewhere."""


class TestFailure(LabdError):
    """The test itself failed (bad exit status, app crash): retrying would not help."""

    __test__ = False  # not a pytest class


class CannotStart(TestFailure):
    """The job's own spec cannot start on this device (a program that is not there, a
    scenario its driver lacks): the job fails with this reason; no retry, no blame on the
    device."""
