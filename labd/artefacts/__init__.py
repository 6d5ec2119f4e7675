"""Artefacts of jobs: the files beside the numbers (videos, heat maps, progress curves, job
logs), listed and served safely, and removed by age and size."""

from labd.artefacts.files import (
    Artefact,
    ArtefactError,
    jobs_folder,
    list_artefacts,
    open_artefact,
)
from labd.artefacts.keeper import ArtefactKeeper, GcReport, SuiteUsage
from labd.artefacts.retention import JobFolder, Removal, plan

__all__ = [
    "Artefact",
    "ArtefactError",
    "ArtefactKeeper",
    "GcReport",
    "JobFolder",
    "Removal",
    "SuiteUsage",
    "jobs_folder",
    "list_artefacts",
    "open_artefact",
    "plan",
]
