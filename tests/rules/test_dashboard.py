"""The Grafana dashboard reads only metrics carbonshift exports, its queries parse
(checked by promtool as recording rules, Grafana's variables filled in), and the chart
ships it and the alerting rules behind their values."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.rules.promtool import CACHE, ROOT, run

DASHBOARD = ROOT / "charts" / "carbonshift" / "dashboards" / "carbonshift.json"
METRICS = (ROOT / "webhook" / "runtime" / "metrics.py").read_text()


def queries() -> list[str]:
    doc = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in doc["panels"] for t in p.get("targets", [])]


def test_the_dashboard_has_the_panels_the_issue_asks_for() -> None:
    doc = json.loads(DASHBOARD.read_text())
    titles = " | ".join(p["title"] for p in doc["panels"])
    for wanted in ("intensity per zone", "Data age", "Stale", "Replicas per cluster",
                   "Avoided emissions", "Re-evaluation", "Admission latency",
                   "Admission outcomes", "Filter/score latency"):  # fmt: skip
        assert wanted.lower() in titles.lower(), wanted
    assert doc["schemaVersion"] == 42


def test_every_metric_the_dashboard_reads_is_exported() -> None:
    exported = set(re.findall(r'"(carbonshift_[a-z0-9_]+)"', METRICS))
    used = {
        re.sub(r"_bucket$", "", m)
        for q in queries()
        for m in re.findall(r"carbonshift_[a-z0-9_]+", q)
    }
    assert used
    assert sorted(used - exported) == []


def test_every_query_parses(tmp_path: Path) -> None:
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query{k}",
         "expr": q.replace("$__rate_interval", "5m").replace("$job", ".*")}
        for k, q in enumerate(queries())
    ]}]}  # fmt: skip
    path = tmp_path / "dashboard-rules.yaml"
    path.write_text(yaml.safe_dump(rules))
    assert f"SUCCESS: {len(queries())} rules found" in run("check", "rules", str(path))


def test_the_chart_ships_the_dashboard_and_the_rules() -> None:
    helm = CACHE / "helm" if (CACHE / "helm").exists() else shutil.which("helm")
    if helm is None:
        pytest.skip("helm is not built (hack/build-helm.sh)")
    done = subprocess.run(
        [str(helm), "template", "t", str(ROOT / "charts" / "carbonshift"),
         "--kube-version", "1.35.4", "--set", "grafana.dashboard.enabled=true",
         "--set", "prometheusRule.enabled=true"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    docs = {d["kind"] + "/" + d["metadata"]["name"]: d
            for d in yaml.safe_load_all(done.stdout) if d}  # fmt: skip
    dashboard = docs["ConfigMap/carbonshift-dashboard"]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["carbonshift.json"]) == json.loads(DASHBOARD.read_text())
    rules = docs["PrometheusRule/carbonshift"]["spec"]
    file_rules = yaml.safe_load(
        (ROOT / "charts/carbonshift/rules/carbonshift-rules.yaml").read_text()
    )
    assert rules == file_rules
