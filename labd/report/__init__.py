"""Self-contained HTML reports of jobs, comparisons and histories, and the charts and tables
they share with the web console."""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from labd.report.comparison import comparability, one_variant

if TYPE_CHECKING:
    from labd.metric_specs import units_of
    from labd.report.html import history_section, render, summaries_table, summary_table
    from labd.report.svg import STYLE as CHART_STYLE
    from labd.report.svg import distribution, history_plot, intervals, progress_curve, series_plot
    from labd.report.tables import (
        SEVERITY,
        by_severity,
        comparison_head,
        comparison_rows,
        environment,
        evidence,
    )

# Rendering brings NumPy and SciPy (about a second); `labd compare` needs only the
# comparability, so the rest is imported when first asked for.
_LAZY = {
    "render": ("labd.report.html", "render"),
    "summary_table": ("labd.report.html", "summary_table"),
    "summaries_table": ("labd.report.html", "summaries_table"),
    "history_section": ("labd.report.html", "history_section"),
    "CHART_STYLE": ("labd.report.svg", "STYLE"),
    "distribution": ("labd.report.svg", "distribution"),
    "history_plot": ("labd.report.svg", "history_plot"),
    "intervals": ("labd.report.svg", "intervals"),
    "progress_curve": ("labd.report.svg", "progress_curve"),
    "series_plot": ("labd.report.svg", "series_plot"),
    "SEVERITY": ("labd.report.tables", "SEVERITY"),
    "by_severity": ("labd.report.tables", "by_severity"),
    "comparison_head": ("labd.report.tables", "comparison_head"),
    "comparison_rows": ("labd.report.tables", "comparison_rows"),
    "environment": ("labd.report.tables", "environment"),
    "evidence": ("labd.report.tables", "evidence"),
    "units_of": ("labd.metric_specs", "units_of"),
}

__all__ = [
    "CHART_STYLE",
    "SEVERITY",
    "by_severity",
    "comparability",
    "comparison_head",
    "comparison_rows",
    "distribution",
    "environment",
    "evidence",
    "history_plot",
    "history_section",
    "intervals",
    "one_variant",
    "progress_curve",
    "render",
    "series_plot",
    "summaries_table",
    "summary_table",
    "units_of",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, attribute = _LAZY[name]
        return getattr(import_module(module), attribute)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
