"""The manifests' pod passes the `restricted` Pod Security Standard, proven by the real
kube-apiserver: the namespace of manifests/base enforces it, the Deployment's pod is
accepted by a server-side dry run, and the same pod with one lock removed is refused."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from e2e_support import Kube, unique

from devtools.sandbox import Sandbox

NAMESPACE = "carbonshift-system"
REFUSED = 'violates PodSecurity "restricted:latest"'


def rendered(sandbox: Sandbox) -> dict[str, dict[str, Any]]:
    """The base's documents by kind (one of each kind that matters here)."""
    out = sandbox.kubectl("kustomize", str(sandbox.layout.root / "manifests" / "base")).stdout
    return {doc["kind"]: doc for doc in yaml.safe_load_all(out) if doc}


def pod_of(deployment: dict[str, Any]) -> dict[str, Any]:
    """The pod the Deployment would create (its template, named, in its namespace)."""
    template = copy.deepcopy(deployment["spec"]["template"])
    metadata = {**template["metadata"], "name": unique("carbonshift"), "namespace": NAMESPACE}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]}


@pytest.fixture(scope="module")
def base(sandbox: Sandbox) -> dict[str, dict[str, Any]]:
    docs = rendered(sandbox)
    Kube(sandbox).apply(docs["Namespace"])  # enforce: restricted, as the manifests say
    return docs


def dry_run(kube: Kube, obj: dict[str, Any]) -> tuple[int, str]:
    result = kube.run("create", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump(obj))
    return result.returncode, result.stderr


def test_the_namespace_enforces_restricted(kube: Kube, base: dict[str, dict[str, Any]]) -> None:
    stored = kube.get("namespace", NAMESPACE)["metadata"]["labels"]
    assert stored["pod-security.kubernetes.io/enforce"] == "restricted"
    assert stored["pod-security.kubernetes.io/enforce-version"] == "latest"


def test_the_deployments_pod_passes_restricted(kube: Kube, base: dict[str, dict[str, Any]]) -> None:
    code, stderr = dry_run(kube, pod_of(base["Deployment"]))
    assert code == 0, stderr
    assert "PodSecurity" not in stderr  # not even a warning
    code, stderr = dry_run(kube, base["Deployment"])
    assert code == 0, stderr
    assert "would violate PodSecurity" not in stderr


def _container(pod: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = pod["spec"]["containers"][0]
    return container


BREAKS: dict[str, Callable[[dict[str, Any]], None]] = {
    "privileged": lambda pod: _container(pod)["securityContext"].update(
        privileged=True, allowPrivilegeEscalation=True
    ),
    "escalation": lambda pod: _container(pod)["securityContext"].update(
        allowPrivilegeEscalation=True
    ),
    "root": lambda pod: (
        pod["spec"]["securityContext"].update(runAsNonRoot=False, runAsUser=0),
        _container(pod)["securityContext"].pop("runAsNonRoot"),
    ),
    "capabilities": lambda pod: _container(pod)["securityContext"].update(
        capabilities={"add": ["NET_ADMIN"]}
    ),
    "seccomp": lambda pod: (
        pod["spec"]["securityContext"].pop("seccompProfile"),
        _container(pod)["securityContext"].update(seccompProfile={"type": "Unconfined"}),
    ),
    "host-path": lambda pod: pod["spec"]["volumes"].append(
        {"name": "host", "hostPath": {"path": "/etc"}}
    ),
}


@pytest.mark.parametrize("broken", sorted(BREAKS))
def test_the_same_pod_with_a_lock_removed_is_refused(
    kube: Kube, base: dict[str, dict[str, Any]], broken: str
) -> None:
    pod = pod_of(base["Deployment"])
    BREAKS[broken](pod)
    code, stderr = dry_run(kube, pod)
    assert code != 0
    assert REFUSED in stderr, stderr
