"""What the sandbox writes and applies: the demo member clusters, carbonshift's config
for them, and the admission webhook registrations."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from devtools.sandbox.layout import SandboxError
from webhook import config

CARBONSHIFT_WEBHOOK_CONFIG = "carbonshift"
KARMADA_WEBHOOK_CONFIG = "karmada-webhook"

DEMO_CLUSTERS: Mapping[str, Mapping[str, Any]] = {
    # name -> cloud location, and the grid zone the region table gives it;
    # intensities ~23, ~99 and ~819 gCO2eq/kWh.
    "member-se": {"zone": "SE-SE3", "provider": "aws", "region": "eu-north-1",
                  "zones": ["eu-north-1a"]},
    "member-fr": {"zone": "FR", "provider": "aws", "region": "eu-west-3",
                  "zones": ["eu-west-3a"]},
    "member-pl": {"zone": "PL", "provider": "gcp", "region": "europe-central2",
                  "zones": ["europe-central2-a"]},
}  # fmt: skip


def user_config(base: Mapping[str, Any], user: Mapping[str, Any]) -> dict[str, Any]:
    """The sandbox's config with a user's on top (``SANDBOX_CONFIG``): the user's sections
    win, section by section, except ``clusters:``, which the sandbox never takes (its
    carbonshift discovers the members from their Cluster objects). Raises
    :class:`~webhook.validation.InvalidInput` naming the key when the result is invalid."""
    merged: dict[str, Any] = dict(base)
    for key, value in user.items():
        if key == "clusters":
            continue
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    config.parse(merged)  # validates: a bad user config fails before anything starts
    return merged


def carbonshift_config() -> dict[str, Any]:
    """carbonshift's config: local zone DE and the demo availability zones for NodePools.

    No ``clusters:``: carbonshift runs with the sandbox's kubeconfig and discovers the
    members from their Cluster objects (zones from ``spec.provider`` + ``spec.region``
    through the region table). Cluster labels and re-evaluation stay off: tests that
    exercise them run their own replicas, and one writer at a time keeps those tests
    meaningful.
    """
    topology = {az: spec["zone"] for spec in DEMO_CLUSTERS.values() for az in spec["zones"]}
    return {
        "zone": "DE",
        "providers": ["static"],
        "nodepools": {"topology_zones": topology},
        "labels": {"enabled": False},
        "reevaluate": {"enabled": False},
    }


def demo_cluster(name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    """A Push-mode Karmada Cluster object (nothing ever dials its endpoint)."""
    return {
        "apiVersion": "cluster.karmada.io/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": name, "labels": {"carbonshift.io/grid-zone": spec["zone"]}},
        "spec": {
            "syncMode": "Push",
            "apiEndpoint": "https://127.0.0.1:1",
            "provider": spec["provider"],
            "region": spec["region"],
            "zones": list(spec["zones"]),
        },
    }


def demo_cluster_status(now: str) -> dict[str, Any]:
    """A healthy member: Ready, serving apps/v1 Deployments, with room for replicas."""
    return {
        "conditions": [{
            "type": "Ready", "status": "True", "reason": "ClusterReady",
            "message": "sandbox member", "lastTransitionTime": now,
        }],
        "apiEnablements": [{
            "groupVersion": "apps/v1",
            "resources": [{"name": "deployments", "kind": "Deployment"}],
        }],
        "resourceSummary": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "1000"}},
    }  # fmt: skip


def carbonshift_webhook_configuration(manifest: Path, url: str, ca_bundle: str) -> dict[str, Any]:
    """The production MutatingWebhookConfiguration, pointed at a URL instead of a Service."""
    try:
        document = yaml.safe_load(manifest.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SandboxError(f"cannot read the webhook manifest {manifest}: {exc}") from exc
    document["metadata"] = {"name": CARBONSHIFT_WEBHOOK_CONFIG}
    for hook in document["webhooks"]:
        hook["clientConfig"] = {"url": url, "caBundle": ca_bundle}
    return dict(document)


def karmada_webhook_configurations(url: str, ca_bundle: str) -> list[dict[str, Any]]:
    """karmada-webhook's own registrations for (Cluster)PropagationPolicy, as upstream."""

    def hook(kind: str, plural: str, scope: str, verb: str) -> dict[str, Any]:
        return {
            "name": f"{kind}.{verb}.karmada.io",
            "rules": [{
                "operations": ["CREATE", "UPDATE"], "apiGroups": ["policy.karmada.io"],
                "apiVersions": ["*"], "resources": [plural], "scope": scope,
            }],
            "clientConfig": {"url": f"{url}/{verb}-{kind}", "caBundle": ca_bundle},
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 3,
        }  # fmt: skip

    policies = [
        ("propagationpolicy", "propagationpolicies", "Namespaced"),
        ("clusterpropagationpolicy", "clusterpropagationpolicies", "Cluster"),
    ]
    meta = {"name": KARMADA_WEBHOOK_CONFIG, "labels": {"app": "karmada-webhook"}}
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": meta,
            "webhooks": [hook(*p, "mutate") for p in policies],
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": meta,
            "webhooks": [hook(*p, "validate") for p in policies],
        },
    ]
