"""What labd's runtime dependencies weigh installed, and what each one alone brings (packages
no other runtime dependency needs), from the installed distributions' own file lists.

Run in an environment where labd is installed: python benchmarks/dependency_size.py
"""

from __future__ import annotations

import re
from importlib.metadata import PackageNotFoundError, distribution

from packaging.requirements import Requirement


def normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(roots: list[str]) -> set[str]:
    """The distributions `roots` need, transitively (those installed here)."""
    seen: set[str] = set()
    stack = list(roots)
    while stack:
        name = normalised(stack.pop())
        if name in seen:
            continue
        try:
            requires = distribution(name).requires or []
        except PackageNotFoundError:
            continue
        seen.add(name)
        for line in requires:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                stack.append(requirement.name)
    return seen


def megabytes(names: set[str]) -> float:
    total = 0
    for name in names:
        for file in distribution(name).files or []:
            path = file.locate()
            if path.is_file():
                total += path.stat().st_size
    return total / 2**20


def main() -> None:
    runtime = [
        Requirement(r).name for r in distribution("labd").requires or [] if "extra ==" not in r
    ]
    everything = closure(runtime)
    print(f"{'runtime dependency':24} {'alone brings':>12} {'MB':>8}")
    rows = []
    for root in runtime:
        alone = everything - closure([r for r in runtime if r != root])
        rows.append((megabytes(alone), root, len(alone)))
    for size, root, count in sorted(rows, reverse=True):
        print(f"{root:24} {count:>7} pkgs {size:>8.1f}")
    print(f"{'all runtime':24} {len(everything):>7} pkgs {megabytes(everything):>8.1f}")


if __name__ == "__main__":
    main()
