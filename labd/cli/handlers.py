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


def lazy(target: str) -> Handler:
    """A handler that imports "module:function" only when called."""

    def run(args: argparse.Namespace) -> int:
        module, _, function = target.partition(":")
        handler: Handler = getattr(importlib.import_module(module), function)
        return handler(args)

    return run
