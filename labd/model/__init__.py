"""The domain model: devices, jobs, test specs, iterations, the job policy. (The driver
interfaces are the plugin SDK's: labd.sdk.)"""

from labd.model.device import (
    AdminState,
    Device,
    DeviceSelector,
    DeviceState,
    job_running_on,
    running_reason,
)
from labd.model.ids import (
    ID_PATTERN,
    KEY_ID_PATTERN,
    OPTIONAL_ID_PATTERN,
    Identifier,
    check_id,
    id_problem,
    key_id_problem,
)
from labd.model.iteration import Iteration
from labd.model.job import TERMINAL, Job, JobState, can_move
from labd.model.manifest import load_manifest, parse_spec
from labd.model.policy import Policy, ProgramNotFound, RunAs
from labd.model.spec import (
    METRIC_NAME,
    METRIC_NAME_MAX,
    METRIC_NAME_RULE,
    PERFHERDER_MAX_UNIT,
    STORED,
    ABSpec,
    BuildInfo,
    FreeText,
    MetricSpec,
    NetworkSpec,
    TestSpec,
    Variant,
    is_metric_name,
    no_control,
)

__all__ = [
    "ID_PATTERN",
    "KEY_ID_PATTERN",
    "METRIC_NAME",
    "METRIC_NAME_MAX",
    "METRIC_NAME_RULE",
    "OPTIONAL_ID_PATTERN",
    "PERFHERDER_MAX_UNIT",
    "STORED",
    "TERMINAL",
    "ABSpec",
    "AdminState",
    "BuildInfo",
    "Device",
    "DeviceSelector",
    "DeviceState",
    "FreeText",
    "Identifier",
    "Iteration",
    "Job",
    "JobState",
    "MetricSpec",
    "NetworkSpec",
    "Policy",
    "ProgramNotFound",
    "RunAs",
    "TestSpec",
    "Variant",
    "can_move",
    "check_id",
    "id_problem",
    "is_metric_name",
    "job_running_on",
    "key_id_problem",
    "load_manifest",
    "no_control",
    "parse_spec",
    "running_reason",
]
