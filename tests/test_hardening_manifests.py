"""What the Pod Security Standard does not check about the pod in manifests/base: a
read-only root, resource requests and limits, the service-account token only where it
is used, a shutdown that fits the grace period, and a NetworkPolicy that admits only
carbonshift's callers. (tests/e2e/test_manifests_lockdown.py proves `restricted` against
the real API server.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from webhook.server import serve

BASE = Path(__file__).resolve().parents[1] / "manifests" / "base"


def documents() -> dict[str, dict[str, Any]]:
    kustomization = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    found = {}
    for name in kustomization["resources"]:
        for doc in yaml.safe_load_all((BASE / name).read_text()):
            if doc:
                found[doc["kind"]] = doc
    return found


DOCS = documents()
POD = DOCS["Deployment"]["spec"]["template"]
CONTAINER = POD["spec"]["containers"][0]


def test_the_container_is_locked_down() -> None:
    context = CONTAINER["securityContext"]
    assert context["readOnlyRootFilesystem"] is True
    assert context["runAsNonRoot"] is True
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert POD["spec"]["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert POD["spec"]["securityContext"]["runAsUser"] != 0
    # The only writable place is a small emptyDir.
    writable = [m for m in CONTAINER["volumeMounts"] if not m.get("readOnly")]
    volumes = {v["name"]: v for v in POD["spec"]["volumes"]}
    assert all("sizeLimit" in volumes[m["name"]].get("emptyDir", {}) for m in writable)


def test_requests_and_limits_are_set() -> None:
    resources = CONTAINER["resources"]
    assert set(resources["requests"]) == {"cpu", "memory"}
    assert set(resources["limits"]) == {"cpu", "memory"}


def test_the_token_is_mounted_only_by_the_pod_that_uses_it() -> None:
    assert DOCS["ServiceAccount"]["automountServiceAccountToken"] is False
    assert POD["spec"]["automountServiceAccountToken"] is True  # fleet, Lease, Events


def test_shutdown_fits_the_grace_period() -> None:
    sleep = CONTAINER["lifecycle"]["preStop"]["sleep"]["seconds"]
    drain = serve.__kwdefaults__["shutdown_seconds"]
    assert sleep + drain + 5 <= POD["spec"]["terminationGracePeriodSeconds"]


def test_the_network_policy_admits_only_the_callers_on_the_https_port() -> None:
    policy = DOCS["NetworkPolicy"]["spec"]
    assert policy["policyTypes"] == ["Ingress"]
    selected = policy["podSelector"]["matchLabels"]
    assert selected.items() <= POD["metadata"]["labels"].items()
    port = next(p["containerPort"] for p in CONTAINER["ports"] if p["name"] == "https")
    for rule in policy["ingress"]:
        assert rule["ports"] == [{"port": port, "protocol": "TCP"}]
        assert rule["from"], "an empty 'from' admits everyone"
        for peer in rule["from"]:
            if "ipBlock" in peer:
                continue  # the API server's addresses
            assert peer["podSelector"]["matchLabels"] == {"carbonshift.io/client": "true"}


def test_the_namespace_enforces_restricted() -> None:
    labels = DOCS["Namespace"]["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
