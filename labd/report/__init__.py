"""Self-contained HTML reports of jobs, comparisons and histories."""

from typing import TYPE_CHECKING, Any

from labd.report.comparison import comparability, one_variant

if TYPE_CHECKING:
    from labd.report.html import render

__all__ = ["comparability", "one_variant", "render"]


def __getattr__(name: str) -> Any:
    # Rendering brings SciPy (about a second); `labd compare` needs only the comparability.
    if name == "render":
        from labd.report.html import render

        return render
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
