"""What the command line's parsers share: handlers imported when they run, and names
checked as labd checks them everywhere."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable

Handler = Callable[[argparse.Namespace], int]


def name_arg(value: str) -> str:
    """An id given on the command line, checked against labd's one grammar for names."""
    from labd.model import id_problem

    if problem := id_problem(value):
        raise argparse.ArgumentTypeError(problem)
    return value


def fraction(value: str) -> float:
    """A number strictly between 0 and 1 (an effect, a significance level, a rate)."""
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if not 0 < number < 1:  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be between 0 and 1 (exclusive), got {value}")
    return number


def count(value: str) -> int:
    """A whole number from 1 to 1,000,000."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {value!r}") from None
    if not 1 <= number <= 1_000_000:
        raise argparse.ArgumentTypeError(f"must be from 1 to 1000000, got {value}")
    return number


def lazy(target: str) -> Handler:
    """A handler that imports "module:function" only when called."""

    def run(args: argparse.Namespace) -> int:
        module, _, function = target.partition(":")
        handler: Handler = getattr(importlib.import_module(module), function)
        return handler(args)

    return run
