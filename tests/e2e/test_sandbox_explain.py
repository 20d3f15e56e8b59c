"""``carbonshift explain`` and ``kubectl carbonshift explain`` against the sandbox: for each
handled kind (PropagationPolicy, ClusterPropagationPolicy, NodePool, NamespaceOffloading)
the sandbox's webhook stores the object with its decision record and its line
(``carbonshift.io/reason``, what ``kubectl get -o yaml`` and ``kubectl describe`` show), and
the command, reading the live object, its Events and the fleet through the kubeconfig,
prints where it is placed and why, each cluster's intensity and room, what would change it
next and who owns each field."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from e2e_support import (
    DECISION,
    ENABLED,
    Kube,
    cluster_propagation_policy,
    nodepool,
    propagation_policy,
    unique,
)
from test_liqo import NSO, liqo, namespace_offloading
from test_schedulers import kube_scheduler

from devtools.sandbox import Sandbox
from webhook.decision.reason import line
from webhook.decision.record import Record
from webhook.model.vocabulary import REASON

__all__ = ["kube_scheduler", "liqo"]  # the module fixtures, started for this module too

MEMBERS = ["member-se", "member-fr", "member-pl"]
LIMIT = {"carbonshift.io/max-intensity": "500"}


def explain(sandbox: Sandbox, *args: str) -> dict[str, Any]:
    """``carbonshift explain ... -o json`` with the sandbox's kubeconfig and config."""
    command = [*sandbox.carbonshift_command, "explain", *args, "-o", "json",
               f"--kubeconfig={sandbox.kubeconfig}",
               f"--config={sandbox.layout.carbonshift_config}"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def plugin(sandbox: Sandbox, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``kubectl carbonshift ...``: kubectl finds the ``kubectl-carbonshift`` plugin on PATH."""
    tools = tmp_path / "plugins"
    tools.mkdir(exist_ok=True)
    script = tools / "kubectl-carbonshift"
    script.write_text(
        f"#!/bin/sh\nexec {sys.executable} -c "
        "'import sys; from webhook.cli import kubectl_plugin; sys.exit(kubectl_plugin())' \"$@\"\n"
    )
    script.chmod(0o755)
    env = {**os.environ, "KUBECONFIG": str(sandbox.kubeconfig),
           "PATH": f"{tools}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}  # fmt: skip
    return subprocess.run(
        [str(sandbox.kubectl_binary()), "carbonshift", *args],
        capture_output=True, text=True, timeout=60, check=False, env=env,
    )  # fmt: skip


def said(obj: Mapping[str, Any]) -> str:
    """The stored line, checked against the stored record."""
    annotations = obj["metadata"]["annotations"]
    text = str(annotations[REASON])
    assert text == line(obj["kind"], Record.decode(annotations[DECISION]))
    return text


@pytest.fixture
def namespace(kube: Kube) -> Any:
    name = kube.namespace(enabled=True)
    try:
        yield name
    finally:
        kube.run("delete", "namespace", name, "--wait=false")


def test_a_propagation_policy_is_explained_where_people_look(
    kube: Kube, namespace: str, tmp_path: Path
) -> None:
    name = unique("web")
    placement = {
        "clusterAffinity": {"clusterNames": list(MEMBERS)},
        "replicaScheduling": {"replicaSchedulingType": "Divided"},
    }
    stored = kube.apply_json(propagation_policy(name, namespace, placement=placement,
                                                annotations=LIMIT))  # fmt: skip
    text = said(stored)
    assert text.startswith("ordered fill: member-se (")
    assert "member-pl excluded: " in text
    assert "above max-intensity 500" in text
    described = kube.ok("describe", "propagationpolicy", name, "-n", namespace)
    assert text[:100] in described  # kubectl describe shows the line (the first 140 characters)
    doc = explain(kube.sandbox, f"pp/{name}", "-n", namespace)
    assert doc["why"] == text
    clusters = {c["name"]: c for c in doc["clusters"]}
    assert clusters["member-se"]["tier"] == 0
    assert clusters["member-pl"]["excluded"] is True
    assert clusters["member-se"]["now"]["room"] is not None  # the Cluster's resourceSummary
    owners = {f["field"]: f["owner"] for f in doc["ownership"]}
    assert owners["spec.placement.clusterAffinities"] == "carbonshift"
    # The sandbox's carbonshift runs without the leader's re-evaluation: explain says so.
    assert any("does not re-evaluate" in n for n in doc["next"]), doc["next"]
    shown = plugin(kube.sandbox, tmp_path, "explain", f"pp/{name}", "-n", namespace)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"PropagationPolicy {namespace}/{name}\n")
    assert f"  why: {text}\n" in shown.stdout


def test_a_cluster_propagation_policy_is_explained(kube: Kube) -> None:
    obj = cluster_propagation_policy(unique("cpp"), labels={ENABLED: "true"})
    obj["spec"]["placement"]["clusterAffinity"] = {"clusterNames": list(MEMBERS)}
    try:
        stored = kube.apply_json(obj)
        text = said(stored)
        assert text.startswith("ordered fill: ")
        doc = explain(kube.sandbox, f"cpp/{obj['metadata']['name']}")
        assert doc["object"]["namespace"] is None
        assert doc["why"] == text
        assert {c["name"] for c in doc["clusters"]} == set(MEMBERS)
    finally:
        kube.run("delete", "clusterpropagationpolicy", obj["metadata"]["name"], "--wait=false")


def test_a_nodepool_says_its_weight(kube: Kube) -> None:
    pool = nodepool(unique("pool"), "weight")
    try:
        stored = kube.apply_json(pool)
        text = said(stored)
        assert f"spec.weight {stored['spec']['weight']}: the grid's greenness" in text
        doc = explain(kube.sandbox, f"nodepool/{pool['metadata']['name']}")
        assert doc["why"] == text
        owners = {f["field"]: f["owner"] for f in doc["ownership"]}
        assert owners["spec.weight"] == "carbonshift"
        assert any("does not re-evaluate" in n for n in doc["next"]), doc["next"]
    finally:
        kube.run("delete", "nodepools.karpenter.sh", pool["metadata"]["name"], "--wait=false")


def test_a_namespace_offloading_names_its_green_peer(
    kube: Kube, liqo: dict[str, str], namespace: str
) -> None:
    wanted = namespace_offloading(liqo["pool"])
    stored = kube.apply_json({**wanted, "metadata": {"name": "offloading", "namespace": namespace}})
    text = said(stored)
    assert text.startswith("offloads to member-se (")
    assert said(kube.get(NSO, "offloading", namespace)) == text
    doc = explain(kube.sandbox, "nso/offloading", "-n", namespace)
    assert doc["why"] == text
    clusters = {c["name"]: c for c in doc["clusters"]}
    assert clusters["member-se"]["weight"] == 1
    assert clusters["member-pl"]["weight"] == 0


def test_an_object_carbonshift_does_not_manage_is_one_line(kube: Kube) -> None:
    namespace = kube.namespace(enabled=False)
    try:
        name = unique("plain")
        kube.apply(propagation_policy(name, namespace))
        command = [*kube.sandbox.carbonshift_command, "explain", f"pp/{name}", "-n", namespace,
                   f"--kubeconfig={kube.sandbox.kubeconfig}"]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 1
        assert done.stdout == ""
        assert done.stderr.count("\n") == 1
        assert "not found among the objects carbonshift manages" in done.stderr
    finally:
        kube.run("delete", "namespace", namespace, "--wait=false")
