"""What the Pod Security Standard does not check about the pod in manifests/base: a
read-only root, resource requests and limits, the service-account token only where it
is used, a shutdown that fits the grace period, and a NetworkPolicy that admits only
carbonshift's callers. (tests/e2e/test_manifests_lockdown.py proves `restricted` against
the real API server.)"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.app import run as serve

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
BASE = MANIFESTS / "base"
NETWORK_POLICY = MANIFESTS / "components" / "networkpolicy"


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


def _component() -> dict[str, Any]:
    kustomization = yaml.safe_load((NETWORK_POLICY / "kustomization.yaml").read_text())
    assert kustomization["kind"] == "Component"
    (name,) = kustomization["resources"]
    policy: dict[str, Any] = yaml.safe_load((NETWORK_POLICY / name).read_text())
    return policy


def test_the_network_policy_is_opt_in_and_ships_no_guessed_api_server_address() -> None:
    """A guessed API-server range silently blocks admissions wherever it is wrong (the
    webhook fails open), so the policy is not in the base, and its ipBlock is a placeholder
    the API server refuses until an overlay sets it."""
    assert "NetworkPolicy" not in DOCS
    blocks = [p["ipBlock"]["cidr"] for r in _component()["spec"]["ingress"] for p in r["from"]
              if "ipBlock" in p]  # fmt: skip
    assert blocks == ["REQUIRED-api-server-CIDR"]
    for cidr in blocks:
        with pytest.raises(ValueError, match="does not appear to be an IPv4 or IPv6 network"):
            ipaddress.ip_network(cidr)


def test_the_network_policy_admits_only_the_callers_on_the_https_port() -> None:
    policy = _component()["spec"]
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


def _generated_configs() -> list[Path]:
    """Every file a kustomization under manifests/ turns into a ConfigMap."""
    found = []
    for kustomization in sorted(MANIFESTS.rglob("kustomization.yaml")):
        spec = yaml.safe_load(kustomization.read_text())
        found += [kustomization.parent / entry.rpartition("=")[2]
                  for generator in spec.get("configMapGenerator", [])
                  for entry in generator.get("files", [])]  # fmt: skip
    return found


def test_no_shipped_config_names_the_local_zone() -> None:
    """The local grid zone comes from the cluster's Nodes; a `zone:` in a shipped config
    would pin every install to one grid. (config/example.yaml, which `make run` serves with
    and no install uses, names one: `make run` has no cluster, its comment says so.)"""
    configs = _generated_configs()
    assert BASE / "config.yaml" in configs
    for path in configs:
        config = yaml.safe_load(path.read_text()) or {}
        assert "zone" not in config, f"{path.relative_to(MANIFESTS)} sets zone: {config['zone']}"


def test_the_namespace_enforces_restricted() -> None:
    labels = DOCS["Namespace"]["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
