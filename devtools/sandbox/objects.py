"""What the sandbox writes and applies: the demo member clusters and how they join
Karmada, carbonshift's config for them, and the admission webhook registrations."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from devtools.sandbox.layout import SandboxError
from webhook.model import config

CARBONSHIFT_WEBHOOK_CONFIG = "carbonshift"
KARMADA_WEBHOOK_CONFIG = "karmada-webhook"

LOCAL_ZONE = "PL"
"""The grid carbonshift runs on in the sandbox (its ``zone``): where the NodePools it
decides launch unless their own zones say otherwise."""

DEMO_CLUSTERS: Mapping[str, Mapping[str, Any]] = {
    # name -> cloud location, and the grid zone the region table gives it;
    # intensities ~20, ~31 and ~565 gCO2eq/kWh (the embedded table, 2025).
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
    :class:`~webhook.model.validation.InvalidInput` naming the key when the result is invalid."""
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


def carbonshift_config(*, quiet: bool = False) -> dict[str, Any]:
    """carbonshift's config: local zone PL (a grid that is high, from 400 g/kWh, in every
    year the embedded table has held, so a NodePool's ``pause`` and ``efficiency`` show at
    once) and the demo availability zones for NodePools.

    No ``clusters:``: carbonshift runs with the sandbox's kubeconfig and discovers the
    members from their Cluster objects (zones from ``spec.provider`` + ``spec.region``
    through the region table). Otherwise the product's defaults: the leader labels the
    Clusters, re-evaluates managed policies and moves replicas back. ``quiet`` (the
    end-to-end tests' fleet) switches cluster labels and re-evaluation off: the tests that
    exercise them run their own replicas, and one writer at a time keeps them meaningful.
    """
    topology = {az: spec["zone"] for spec in DEMO_CLUSTERS.values() for az in spec["zones"]}
    config: dict[str, Any] = {
        "zone": LOCAL_ZONE,
        "providers": ["static"],
        "nodepools": {"topology_zones": topology},
    }
    if quiet:
        config |= {"labels": {"enabled": False}, "reevaluate": {"enabled": False}}
    return config


JOIN_NAMESPACE = "karmada-cluster"
"""Where ``karmadactl join`` keeps the member's credentials: the ServiceAccount in the
member, the Secret on the Karmada API server."""


def join_account(member: str) -> str:
    """The member's ServiceAccount Karmada acts as (``karmadactl join``'s name)."""
    return f"karmada-{member}"


def member_join_objects(member: str) -> list[dict[str, Any]]:
    """Applied to the member: a ServiceAccount that may do anything, as ``karmadactl join``
    sets up for Push mode (its token goes into the Cluster's Secret)."""
    account = join_account(member)
    role = f"karmada-controller-manager:{account}"
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": JOIN_NAMESPACE}},
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": account, "namespace": JOIN_NAMESPACE}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": role},
         "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                   {"nonResourceURLs": ["*"], "verbs": ["get"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": role},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": role},
         "subjects": [{"kind": "ServiceAccount", "name": account,
                       "namespace": JOIN_NAMESPACE}]},
    ]  # fmt: skip


def cluster_secret(member: str, token: str, ca_bundle: str) -> dict[str, Any]:
    """The Secret a Push-mode Cluster's ``secretRef`` names: the member's bearer ``token``
    and the ``caBundle`` that signed its serving certificate (base64 of the PEM)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": member, "namespace": JOIN_NAMESPACE},
        "type": "Opaque",
        "data": {"token": base64.b64encode(token.encode()).decode(), "caBundle": ca_bundle},
    }


def demo_cluster(name: str, spec: Mapping[str, Any], endpoint: str) -> dict[str, Any]:
    """A Push-mode Karmada Cluster for a member whose API server is at ``endpoint``; its
    status comes from karmada-controller-manager, which dials the member."""
    return {
        "apiVersion": "cluster.karmada.io/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": name, "labels": {"carbonshift.io/grid-zone": spec["zone"]}},
        "spec": {
            "syncMode": "Push",
            "apiEndpoint": endpoint,
            "secretRef": {"namespace": JOIN_NAMESPACE, "name": name},
            "provider": spec["provider"],
            "region": spec["region"],
            "zones": list(spec["zones"]),
        },
    }


SIMULATED_NODE = "kwok-node"
NODE_RESOURCES: Mapping[str, str] = {"cpu": "64", "memory": "256Gi", "pods": "1000"}
"""What a member's one simulated Node offers unless :data:`MEMBER_CPUS` says otherwise:
Karmada's resource summary (and so Aggregated, dynamic-weight division and the ordered
fill's tiers) is computed from it."""
MEMBER_CPUS: Mapping[str, str] = {"member-se": "4", "member-fr": "8", "member-pl": "64"}
"""CPUs of each member's Node: the greener the member, the less room, so capacity matters.
The greenest (member-se) holds four one-CPU replicas, member-fr eight; workloads that ask
for no CPU are bounded by pods only (1000 on every member)."""


def node_resources(member: str) -> dict[str, str]:
    """What ``member``'s simulated Node offers."""
    return {**NODE_RESOURCES, "cpu": MEMBER_CPUS.get(member, NODE_RESOURCES["cpu"])}


def simulated_node() -> dict[str, Any]:
    """A Node that KWOK simulates (no kubelet): KWOK makes it Ready and keeps its lease,
    the member's kube-scheduler binds Pods to it and KWOK reports them Running."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": SIMULATED_NODE,
            "annotations": {"kwok.x-k8s.io/node": "fake"},
            "labels": {"kubernetes.io/hostname": SIMULATED_NODE, "type": "kwok"},
        },
    }


def simulated_node_capacity(member: str) -> dict[str, Any]:
    """The Node's capacity on ``member`` (KWOK keeps it; its conditions are KWOK's)."""
    resources = node_resources(member)
    return {"status": {"capacity": resources, "allocatable": dict(resources)}}


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


KARMADA_MUTATED = (
    # path, API group, resource, scope, operations: as upstream's webhook-configuration.yaml
    ("propagationpolicy", "policy.karmada.io", "propagationpolicies", "Namespaced",
     ["CREATE", "UPDATE"]),
    ("clusterpropagationpolicy", "policy.karmada.io", "clusterpropagationpolicies", "Cluster",
     ["CREATE", "UPDATE"]),
    # Bindings and Works get their permanent-id labels here; without them the binding
    # controller takes every unlabelled Work in the namespace for an orphan of each binding.
    ("resourcebinding", "work.karmada.io", "resourcebindings", "Namespaced", ["CREATE"]),
    ("clusterresourcebinding", "work.karmada.io", "clusterresourcebindings", "Cluster",
     ["CREATE"]),
    ("work", "work.karmada.io", "works", "Namespaced", ["CREATE", "UPDATE"]),
)  # fmt: skip
KARMADA_VALIDATED = KARMADA_MUTATED[:2]


def karmada_webhook_configurations(url: str, ca_bundle: str) -> list[dict[str, Any]]:
    """karmada-webhook's own registrations, as upstream: (Cluster)PropagationPolicy
    defaults and validation, and the permanent ids of bindings and Works."""

    def hook(
        path: str, group: str, plural: str, scope: str, operations: list[str], *, verb: str
    ) -> dict[str, Any]:
        return {
            "name": f"{path}.{verb}.karmada.io",
            "rules": [{
                "operations": operations, "apiGroups": [group],
                "apiVersions": ["*"], "resources": [plural], "scope": scope,
            }],
            "clientConfig": {"url": f"{url}/{verb}-{path}", "caBundle": ca_bundle},
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 3,
        }  # fmt: skip

    meta = {"name": KARMADA_WEBHOOK_CONFIG, "labels": {"app": "karmada-webhook"}}
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": meta,
            "webhooks": [hook(*entry, verb="mutate") for entry in KARMADA_MUTATED],
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": meta,
            "webhooks": [hook(*entry, verb="validate") for entry in KARMADA_VALIDATED],
        },
    ]
