"""The whole application goes where its replicas may go: Karmada's rules for non-workloads.

Karmada (v1.18.2) applies a term's ``overflowAffinities`` to workloads only: the
cluster-affinity filter adds them when ``bindingSpec.IsWorkload()`` (``replicas > 0``,
``replicaRequirements`` or ``components``); a ConfigMap, Secret, Service, Ingress... selected
by the same policy goes to the term's primary group alone. So an ordered fill that spreads a
Deployment's replicas over several tiers would leave the ConfigMap its pods read and the
Service in front of them in the greenest tier only.

Karmada's own answer for resources that must follow a workload is a binding's
``spec.requiredBy``: the binding controller sends a binding's Works to its scheduled
clusters *plus* every cluster its ``requiredBy`` snapshots name (``mergeTargetClusters``);
the dependencies distributor uses it for the pod template's dependencies
(``propagateDeps: true``). The leader keeps one snapshot of its own on every non-workload
binding of a policy carbonshift manages (:func:`carried`): named
``carbonshift.<Kind>.<policy>``, it lists every cluster a replica of that policy may be put
on (each term with its overflow tiers, :func:`replica_reach`, plus wherever a workload of the
policy runs now). Snapshots of others (the dependencies distributor's) are kept as they are;
ours is removed once the policy is no longer managed. Reach never widens: every cluster named
is one the user's own placement allows.

Where no leader carries them (no cluster connection), admission keeps such a policy in one
group instead (:func:`selection`: what a policy's ``resourceSelectors`` select).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from webhook.decision.karmada.terms import GREEN_TERM
from webhook.model.objects import dig

SNAPSHOT = "carbonshift."
"""Name prefix of the ``requiredBy`` snapshots carbonshift keeps (``carbonshift.<Kind>.<name>``)."""

WORKLOADS = frozenset(
    {
        ("apps", "Deployment"),
        ("apps", "StatefulSet"),
        ("apps", "ReplicaSet"),
        ("batch", "Job"),
        ("", "Pod"),
    }
)
"""Kinds Karmada's default resource interpreter gives replicas (``GetReplicas``)."""

NON_WORKLOADS: dict[str, frozenset[str]] = {
    "": frozenset({
        "ConfigMap", "Secret", "Service", "ServiceAccount", "PersistentVolumeClaim",
        "PersistentVolume", "Namespace", "Endpoints", "LimitRange", "ResourceQuota",
    }),
    "apps": frozenset({"DaemonSet", "ControllerRevision"}),
    "batch": frozenset({"CronJob"}),
    "networking.k8s.io": frozenset({"Ingress", "IngressClass", "NetworkPolicy"}),
    "rbac.authorization.k8s.io": frozenset({
        "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding",
    }),
    "policy": frozenset({"PodDisruptionBudget"}),
    "autoscaling": frozenset({"HorizontalPodAutoscaler"}),
    "storage.k8s.io": frozenset({"StorageClass"}),
    "scheduling.k8s.io": frozenset({"PriorityClass"}),
    "apiextensions.k8s.io": frozenset({"CustomResourceDefinition"}),
    "discovery.k8s.io": frozenset({"EndpointSlice"}),
    "node.k8s.io": frozenset({"RuntimeClass"}),
    "gateway.networking.k8s.io": frozenset({
        "Gateway", "GatewayClass", "HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute",
        "UDPRoute", "ReferenceGrant",
    }),
    "multicluster.x-k8s.io": frozenset({"ServiceExport", "ServiceImport"}),
    "networking.karmada.io": frozenset({"MultiClusterService", "MultiClusterIngress"}),
}  # fmt: skip
"""Kinds that are never workloads to Karmada (no replicas to divide; a DaemonSet or CronJob
neither). Any other kind may be one (a custom resource, through a resource interpreter
customization) and counts as one."""


def group_of(api_version: str) -> str:
    return api_version.rpartition("/")[0] if "/" in api_version else ""


@dataclasses.dataclass(frozen=True, slots=True)
class Selection:
    """What a policy's ``resourceSelectors`` select, by kind."""

    workloads: tuple[str, ...] = ()
    """Kinds Karmada divides replicas of."""
    others: tuple[str, ...] = ()
    """Kinds that are never workloads (ConfigMap, Secret, Service...: :data:`NON_WORKLOADS`)."""
    unknown: tuple[str, ...] = ()
    """Any other kind: it may be a workload (a custom resource with a resource interpreter
    customization)."""

    @property
    def mixed(self) -> bool:
        """Non-workloads beside what may be a workload: the case the leader carries."""
        return bool(self.others) and bool(self.workloads or self.unknown)

    @property
    def no_workload(self) -> bool:
        """Only kinds that are never workloads: there are no replicas to place."""
        return bool(self.others) and not (self.workloads or self.unknown)


def selection(spec: Mapping[str, Any]) -> Selection:
    """Classify the kinds of a policy's ``resourceSelectors``."""
    selectors = spec.get("resourceSelectors")
    workloads: list[str] = []
    others: list[str] = []
    unknown: list[str] = []
    for selector in selectors if isinstance(selectors, list) else []:
        if not isinstance(selector, Mapping):
            continue
        kind, api_version = selector.get("kind"), selector.get("apiVersion")
        if not isinstance(kind, str) or not isinstance(api_version, str):
            continue
        group = group_of(api_version)
        bucket = (
            workloads
            if (group, kind) in WORKLOADS
            else others
            if kind in NON_WORKLOADS.get(group, frozenset())
            else unknown
        )
        if kind not in bucket:
            bucket.append(kind)
    return Selection(tuple(workloads), tuple(others), tuple(unknown))


def is_workload(spec: Mapping[str, Any]) -> bool:
    """Karmada's ``ResourceBindingSpec.IsWorkload``: replicas, requirements or components."""
    replicas = spec.get("replicas")
    return (
        (isinstance(replicas, int) and replicas > 0)
        or spec.get("replicaRequirements") is not None
        or bool(spec.get("components"))
    )


def carbonshift_terms(placement: Mapping[str, Any]) -> bool:
    """Whether the placement holds terms carbonshift wrote (ordered fill or green-first)."""
    terms = placement.get("clusterAffinities")
    return isinstance(terms, list) and any(
        isinstance(t, Mapping) and t.get("affinityName") == GREEN_TERM for t in terms
    )


def replica_reach(placement: Mapping[str, Any]) -> list[str]:
    """Every cluster a policy's terms name, with their overflow tiers, in order: where
    Karmada may put a replica (unnamed tiers, an open selection's, add nothing here)."""
    out: list[str] = []
    terms = placement.get("clusterAffinities")
    for term in terms if isinstance(terms, list) else []:
        if not isinstance(term, Mapping):
            continue
        overflow = term.get("overflowAffinities")
        for affinity in (term, *(overflow if isinstance(overflow, list) else [])):
            names = affinity.get("clusterNames") if isinstance(affinity, Mapping) else None
            for name in names if isinstance(names, list) else []:
                if isinstance(name, str) and name not in out:
                    out.append(name)
    return out


def snapshot_name(kind: str, name: str) -> str:
    return f"{SNAPSHOT}{kind}.{name}"


def carried(
    required_by: object, snapshot: tuple[str, str], clusters: Iterable[str] | None
) -> list[dict[str, Any]] | None:
    """A non-workload binding's ``spec.requiredBy`` with carbonshift's snapshot set to
    ``clusters`` (None: removed); None when it already stands so.

    ``snapshot``: (namespace, name) of carbonshift's entry. Every other entry is kept as it is.
    """
    entries = (
        [e for e in required_by if isinstance(e, Mapping)] if isinstance(required_by, list) else []
    )
    namespace, name = snapshot
    mine = [e for e in entries if e.get("name") == name and (e.get("namespace") or "") == namespace]
    rest = [dict(e) for e in entries if e not in mine]
    if clusters is None:
        return rest if mine else None
    want = {
        "namespace": namespace,
        "name": name,
        "clusters": [{"name": c} for c in sorted(set(clusters))],
    }
    if not namespace:
        del want["namespace"]
    if len(mine) == 1 and _same(mine[0], want):
        return None
    return [*rest, want]


def _same(entry: Mapping[str, Any], want: Mapping[str, Any]) -> bool:
    clusters = entry.get("clusters")
    names = sorted(
        str(c.get("name"))
        for c in (clusters if isinstance(clusters, list) else [])
        if isinstance(c, Mapping)
    )
    return names == [c["name"] for c in want["clusters"]]


def lazy(policy: Mapping[str, Any]) -> bool:
    """``activationPreference: Lazy``: Karmada applies a change of the policy only once the
    resource template changes (``propagation_types.go``), so a rewrite moves nothing now."""
    return bool(dig(policy, "spec", "activationPreference") == "Lazy")
