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
    assert check.returncode == 0 and "SUCCESS: 9 rules found" in check.stdout, (
        check.stdout + check.stderr
    )
    # The shipped scrape configuration loads them (an admin copying it got no alerts).
    config = rules.parent / "prometheus.yml"
    check = subprocess.run(
        [promtool, "check", "config", str(config)], capture_output=True, text=True
    )
    assert check.returncode == 0 and "SUCCESS: 1 rule files found" in check.stdout, check.stdout
    daemon: LabdProcess = start_labd()
    families = exported_families(daemon.get("/metrics")[1])
    assert daemon.stop() == 0
    for name in set(re.findall(r"\blabd_[a-z_]+\b", rules.read_text())):
        base = next((name[: -len(s)] for s in SUFFIXES if name.endswith(s)), name)
        assert name in families or base in families, f"{name} is not exported by labd"


# Metrics exported by one host for the whole lab: a panel of them follows $lab only.
LAB_WIDE = {"labd_queue_depth", "labd_queue_oldest_wait_seconds", "labd_jobs"}


def test_every_panel_follows_lab_and_host() -> None:
    """Choosing a lab and a host in Grafana narrows every panel: each query joins
    labd_build_info filtered by both (by $lab alone for the lab-wide queue gauges, which the
    panel's description says)."""
    dashboard = json.loads(DASHBOARD.read_text())
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert len(panels) >= 13
    for panel in panels:
        assert panel.get("targets"), f"panel {panel['title']!r} has no query"
        for target in panel["targets"]:
            expr = target["expr"]
            named = set(re.findall(r"\blabd_[a-z_]+\b", expr)) - {"labd_build_info"}
            assert 'labd_build_info{lab=~"$lab"' in expr, f"{panel['title']!r}: {expr}"
            if named <= LAB_WIDE:
                assert "$lab" in panel.get("description", ""), panel["title"]
            else:
                assert 'host=~"$host"' in expr, f"{panel['title']!r} ignores $host: {expr}"
            assert "{{instance}}" not in target.get("legendFormat", ""), panel["title"]


def _as_input_series(metrics_text: str, instance: str) -> list[dict[str, str]]:
    """The samples of a /metrics page as promtool input series, held constant for 20 min."""
    series = []
    for line in metrics_text.splitlines():
        if not line or line.startswith("#"):
            continue
        name_labels, value = line.rsplit(" ", 1)
        name, _, labels = name_labels.partition("{")
        labels = labels.rstrip("}")
        joined = f'instance="{instance}"' + (f",{labels}" if labels else "")
        series.append({"series": f"{name}{{{joined}}}", "values": f"{float(value)}x20"})
    return series


def test_a_quiet_lab_shows_zero_not_no_data(start_labd: Any, tmp_path: Path) -> None:
    """A daemon that has run nothing yet: Prometheus evaluating the dashboard's counting
    panels over its real /metrics gets a 0 for every state, verdict and platform, where
    uninitialised label sets would give "No data"."""
    import shutil
    import subprocess

    import pytest

    from tests.conftest import REQUIRE_SERVICES

    promtool = shutil.which("promtool")
    if promtool is None:
        if REQUIRE_SERVICES:
            pytest.fail("promtool is missing (apt-get install prometheus)")
        pytest.skip("promtool is missing (apt-get install prometheus)")
    daemon: LabdProcess = start_labd()
    text = daemon.get("/metrics")[1]
    assert daemon.stop() == 0
    lab = re.search(r'labd_build_info\{[^}]*lab="([^"]+)"', text)
    host = re.search(r'labd_build_info\{[^}]*host="([^"]+)"', text)
    assert lab and host
    dashboard = json.loads(DASHBOARD.read_text())
    by_title = {p["title"]: p for p in dashboard["panels"]}
    expected = {
        "Throughput: jobs finished per minute": [
            {"labels": f'{{state="{s}"}}', "value": 0}
            for s in ("cancelled", "failed", "succeeded", "timed_out")
        ],
        "Regressions and improvements found": [
            {"labels": '{verdict="improvement"}', "value": 0},
            {"labels": '{verdict="regression"}', "value": 0},
        ],
        "Queue depth": [
            {"labels": f'{{priority="{p}"}}', "value": 0} for p in ("high", "low", "normal")
        ],
    }
    tests = []
    for title, samples in expected.items():
        expr = by_title[title]["targets"][0]["expr"]
        expr = expr.replace("$lab", lab.group(1)).replace("$host", host.group(1))
        tests.append({"expr": expr, "eval_time": "10m", "exp_samples": samples})
    # Every platform of the loaded drivers, whether or not a device of it is plugged in.
    platforms = sorted(set(re.findall(r'^labd_devices\{[^}]*platform="(\w+)"', text, re.M)))
    assert "host" in platforms and len(platforms) > 1
    by_platform = [{"labels": f'{{platform="{p}"}}', "value": 0} for p in platforms]
    failures = by_title["Failures: health checks, power cycles, quarantines"]["targets"]
    zero = [{"labels": "{}", "value": 0}]  # power cycles: one series without labels
    for target, samples in zip(failures, [by_platform, zero, by_platform], strict=True):
        expr = target["expr"].replace("$lab", lab.group(1)).replace("$host", host.group(1))
        tests.append({"expr": expr, "eval_time": "10m", "exp_samples": samples})
    spec = {
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": _as_input_series(text, "lab-host-1:9471"),
                "promql_expr_test": tests,
            }
        ],
    }
    path = tmp_path / "quiet_lab_test.json"  # YAML is a superset of JSON
    path.write_text(json.dumps(spec))
    check = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
