"""The Kueue MultiKueue grants: the ClusterRole's Kueue rules come from Kueue's row of the
integrations (``make generate``), and Secrets are granted only in Kueue's namespace, only
``get``, only when asked for: the chart with ``config.kueue.enabled``, kustomize with the
opt-in component ``manifests/components/kueue``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.project.test_chart import ROOT, helm, template  # noqa: F401 - helm: a fixture
from webhook.integrations import kueue

COMPONENT = ROOT / "manifests" / "components" / "kueue"


def secret_rules(docs: list[Any]) -> dict[tuple[str, str], list[Any]]:
    """(kind, namespace) of each Role/ClusterRole granting anything on secrets -> its rules."""
    found = {}
    for doc in docs:
        if doc and doc.get("kind") in ("Role", "ClusterRole"):
            rules = [r for r in doc.get("rules") or [] if "secrets" in r.get("resources", [])]
            if rules:
                found[(doc["kind"], doc["metadata"].get("namespace", ""))] = rules
    return found


def test_the_cluster_role_grants_what_the_kueue_controllers_use() -> None:
    rules = {(g.group, r): set(g.verbs) for g in kueue.ROW.grants for r in g.resources}
    assert rules[("kueue.x-k8s.io", "workloads/status")] == {"patch"}
    assert rules[("kueue.x-k8s.io", "multikueueconfigs")] == {"get", "list", "watch", "update"}
    for watched in ("workloads", "clusterqueues", "admissionchecks", "multikueueclusters"):
        assert "watch" in rules[("kueue.x-k8s.io", watched)], watched
    assert "watch" in rules[("carbonshift.io", "carbonwindows")]
    assert rules[("batch", "jobs")] == {"get"}
    assert not any(r == "secrets" for _, r in rules)


def test_the_chart_grants_secrets_only_in_kueues_namespace_when_kueue_is_on(helm: Path) -> None:  # noqa: F811
    assert secret_rules(template(helm)) == {}
    on = template(helm, "--set", "config.kueue.enabled=true")
    assert secret_rules(on) == {
        ("Role", "kueue-system"): [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]
    }
    elsewhere = template(helm, "--set", "config.kueue.enabled=true",
                         "--set", "config.kueue.namespace=batch-system")  # fmt: skip
    assert list(secret_rules(elsewhere)) == [("Role", "batch-system")]


def test_the_kustomize_component_grants_secrets_only_in_kueues_namespace() -> None:
    docs = list(yaml.safe_load_all((COMPONENT / "kueue-rbac.yaml").read_text()))
    assert secret_rules(docs) == {
        ("Role", "kueue-system"): [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]
    }
    component = yaml.safe_load((COMPONENT / "kustomization.yaml").read_text())
    assert component["kind"] == "Component"
    assert component["resources"] == ["carbonwindows.yaml", "kueue-rbac.yaml"]


def test_the_chart_ships_the_same_carbon_window_crd() -> None:
    chart = ROOT / "charts" / "carbonshift" / "crds" / "carbonwindows.yaml"
    assert chart.read_text() == (COMPONENT / "carbonwindows.yaml").read_text()
    crd = yaml.safe_load(chart.read_text())
    assert (crd["spec"]["group"], crd["spec"]["scope"]) == ("carbonshift.io", "Cluster")
