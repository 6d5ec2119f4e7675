"""The Grafana dashboard asks only for metrics labd exports."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.conftest import LabdProcess

DASHBOARD = Path(__file__).parents[2] / "deploy" / "grafana" / "labd.json"
SUFFIXES = ("_total", "_bucket", "_count", "_sum")


def exported_families(text: str) -> set[str]:
    return {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}


def queried_metrics(dashboard: dict[str, Any]) -> set[str]:
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    exprs += [v["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    return {name for e in exprs for name in re.findall(r"\blabd_[a-z_]+\b", e)}


def test_every_dashboard_query_names_an_exported_metric(start_labd: Any) -> None:
    daemon: LabdProcess = start_labd()
    families = exported_families(daemon.get("/metrics")[1])
    assert daemon.stop() == 0
    dashboard = json.loads(DASHBOARD.read_text())
    queried = queried_metrics(dashboard)
    assert len(queried) >= 15
    for name in sorted(queried):
        base = next((name[: -len(s)] for s in SUFFIXES if name.endswith(s)), name)
        assert name in families or base in families, f"{name} is not exported by labd"
    titles = {p["title"] for p in dashboard["panels"] if p["type"] == "row"}
    assert titles == {"Lab overview", "Per-test trends", "Daemon health"}


def test_every_dashboard_query_is_valid_promql(tmp_path: Path) -> None:
    import shutil
    import subprocess

    import pytest

    from tests.conftest import REQUIRE_SERVICES

    promtool = shutil.which("promtool")
    if promtool is None:
        if REQUIRE_SERVICES:
            pytest.fail("promtool is missing (apt-get install prometheus)")
        pytest.skip("promtool is missing (apt-get install prometheus)")
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    rules = [
        {"record": f"labd:dashboard:{n}", "expr": re.sub(r"\$[a-z]+", ".*", e)}
        for n, e in enumerate(exprs)
    ]
    path = tmp_path / "rules.json"  # YAML is a superset of JSON
    path.write_text(json.dumps({"groups": [{"name": "dashboard", "rules": rules}]}))
    check = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def test_alerting_rules_are_valid_and_name_exported_metrics(start_labd: Any) -> None:
    import shutil
    import subprocess

    import pytest

    from tests.conftest import REQUIRE_SERVICES

    rules = DASHBOARD.parents[1] / "prometheus-rules.yml"
    promtool = shutil.which("promtool")
    if promtool is None:
        if REQUIRE_SERVICES:
            pytest.fail("promtool is missing (apt-get install prometheus)")
        pytest.skip("promtool is missing (apt-get install prometheus)")
    check = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True)
    assert check.returncode == 0 and "SUCCESS: 7 rules found" in check.stdout, (
        check.stdout + check.stderr
    )
    daemon: LabdProcess = start_labd()
    families = exported_families(daemon.get("/metrics")[1])
    assert daemon.stop() == 0
    for name in set(re.findall(r"\blabd_[a-z_]+\b", rules.read_text())):
        base = next((name[: -len(s)] for s in SUFFIXES if name.endswith(s)), name)
        assert name in families or base in families, f"{name} is not exported by labd"
