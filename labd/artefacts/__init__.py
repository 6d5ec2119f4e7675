"""Artefacts of jobs: the files beside the numbers (videos, heat maps, progress curves, job
logs), listed and served safely, and removed by age and size."""

from labd.artefacts.files import (
    ARTEFACTS_PAGE,
    ARTEFACTS_PAGE_MAX,
    INLINE,
    Artefact,
    ArtefactError,
    ArtefactPage,
    api_path,
    artefact_page,
    content_type,
    encoded_separator,
    jobs_folder,
    list_artefacts,
    open_artefact,
    path_problem,
)
from labd.artefacts.keeper import ArtefactKeeper, GcReport, SuiteUsage
from labd.artefacts.retention import JobFolder, Removal, plan

__all__ = [
    "ARTEFACTS_PAGE",
    "ARTEFACTS_PAGE_MAX",
    "INLINE",
    "Artefact",
    "ArtefactError",
    "ArtefactKeeper",
    "ArtefactPage",
    "GcReport",
    "JobFolder",
    "Removal",
    "SuiteUsage",
    "api_path",
    "artefact_page",
    "content_type",
    "encoded_separator",
    "jobs_folder",
    "list_artefacts",
    "open_artefact",
    "path_problem",
    "plan",
]
