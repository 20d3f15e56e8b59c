"""Pure readers of Karmada's ResourceBindings and Clusters: which policy made a binding,
which workload it carries, where its replicas are, whether Karmada's scheduler has caught
up with it, what one replica asks for, the Clusters' resource summaries. Read by the
rebalancer, the carrier and the accounting (each lists the objects itself)."""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from webhook.decision.quantity import quantity
from webhook.model.objects import dig, items, mapping, meta_of
from webhook.model.resources import Resource
from webhook.model.vocabulary import parse_time

CLUSTERS = Resource("cluster.karmada.io", "v1alpha1", "clusters", "Cluster")
POLICY_GROUP, POLICY_VERSION = "policy.karmada.io", "v1alpha1"
POLICY_PLURALS = {
    "PropagationPolicy": "propagationpolicies",
    "ClusterPropagationPolicy": "clusterpropagationpolicies",
}
BINDINGS = (
    Resource("work.karmada.io", "v1alpha2", "resourcebindings", "ResourceBinding"),
    Resource("work.karmada.io", "v1alpha2", "clusterresourcebindings", "ClusterResourceBinding"),
)

# Karmada's links from a binding to the policy that made it (well_known_constants.go).
PP_NAME = "propagationpolicy.karmada.io/name"
PP_NAMESPACE = "propagationpolicy.karmada.io/namespace"
CPP_NAME = "clusterpropagationpolicy.karmada.io/name"

PolicyKey = tuple[str, str, str]
"""(kind, namespace, name) of a (Cluster)PropagationPolicy; namespace "" when cluster-scoped."""
Workload = tuple[str, str, str, str]
"""(apiVersion, kind, namespace, name) of a binding's resource."""


def _time(value: object) -> datetime.datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return parse_time(value)
    except ValueError:
        return None


def policy_key(obj: Mapping[str, Any]) -> PolicyKey:
    meta = meta_of(obj)
    return str(obj.get("kind") or ""), meta.namespace, meta.name


def owner(binding: Mapping[str, Any]) -> PolicyKey | None:
    """The policy that made a (Cluster)ResourceBinding, from Karmada's annotations."""
    meta = meta_of(binding)
    annotations = meta.annotations
    if annotations.get(PP_NAME):
        namespace = annotations.get(PP_NAMESPACE) or meta.namespace
        return "PropagationPolicy", namespace, annotations[PP_NAME]
    if annotations.get(CPP_NAME):
        return "ClusterPropagationPolicy", "", annotations[CPP_NAME]
    return None


def workload(binding: Mapping[str, Any]) -> Workload | None:
    resource = mapping(binding, "spec", "resource")
    parts = tuple(str(resource.get(k) or "") for k in ("apiVersion", "kind", "namespace", "name"))
    if not (parts[0] and parts[1] and parts[3]):
        return None
    return parts[0], parts[1], parts[2], parts[3]


def placed(binding: Mapping[str, Any]) -> dict[str, int]:
    """Where the binding's replicas are: ``spec.clusters``."""
    out: dict[str, int] = {}
    for target in items(binding, "spec", "clusters"):
        if isinstance(target, Mapping) and isinstance(target.get("replicas"), int):
            out[str(target.get("name"))] = out.get(str(target.get("name")), 0) + target["replicas"]
    return {name: n for name, n in out.items() if n > 0}


def pending(binding: Mapping[str, Any]) -> bool:
    """Karmada has not scheduled the binding as it stands: its scheduler has not observed
    the binding's latest spec (a new placement, say), a reschedule asked for and not done
    yet, or replicas not yet divided."""
    generation = dig(binding, "metadata", "generation")
    observed = dig(binding, "status", "schedulerObservedGeneration")
    if isinstance(generation, int) and isinstance(observed, int) and observed < generation:
        return True
    spec = mapping(binding, "spec")
    asked = _time(spec.get("rescheduleTriggeredAt"))
    if asked is not None:
        done = _time(mapping(binding, "status").get("lastScheduledTime"))
        if done is None or asked > done:
            return True
    replicas = spec.get("replicas")
    return isinstance(replicas, int) and replicas != sum(placed(binding).values())


def requests(binding: Mapping[str, Any]) -> Mapping[str, Any]:
    return mapping(binding, "spec", "replicaRequirements", "resourceRequest")


def resource_summaries(clusters: Iterable[Mapping[str, Any]]) -> dict[str, object]:
    """Cluster name -> its ``status.resourceSummary`` (None when it has none)."""
    return {meta_of(c).name: dig(c, "status", "resourceSummary") for c in clusters}


def with_allocating(summary: object, extra: Mapping[str, Decimal]) -> object:
    """``summary`` with ``extra`` added to what it counts as allocating."""
    if not extra or not isinstance(summary, Mapping):
        return summary
    allocating = dict(mapping(summary, "allocating"))
    for resource, amount in extra.items():
        before = quantity(allocating.get(resource, "0")) or Decimal(0)
        allocating[resource] = str(before + amount)
    return {**summary, "allocating": allocating}


def mean_intensity(counts: Mapping[str, int], intensities: Mapping[str, float | None]) -> float:
    """Replica-weighted mean intensity of a placement (clusters without a value left out)."""
    known = [(n, v) for c, n in counts.items() if (v := intensities.get(c)) is not None]
    total = sum(n for n, _ in known)
    return sum(n * v for n, v in known) / total if total else 0.0
