"""Karmada PropagationPolicy and ClusterPropagationPolicy: carbon placement.

Admission writes the ordered fill (or static carbon weights, green-first terms,
``max-intensity`` excludes) into ``spec.placement``
(:func:`webhook.decision.karmada.placement.decide`);
the leader re-decides it on the forecast behind the hysteresis, and moves replicas back to
greener tiers of an ordered fill with WorkloadRebalancers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.decision.karmada import placement
from webhook.decision.outcome import Decision
from webhook.kinds.base import Context, Following, Grant, Kind

GROUP = "policy.karmada.io"


def decide(obj: Mapping[str, Any], ctx: Context) -> Decision:
    """The placement for ``obj`` on the context's (forecast-ranked) intensities."""
    inputs = placement.PolicyInputs(
        ctx.clusters,
        ctx.table if ctx.ranked is None else ctx.ranked,
        ctx.config.weighting,
        hysteresis=ctx.config.hysteresis,
        now=ctx.now,
        carried=ctx.fleet is not None and ctx.config.carry.enabled,
        api=ctx.karmada_api,
    )
    return placement.decide(obj, inputs)


GRANTS = (
    Grant(
        GROUP,
        ("propagationpolicies", "clusterpropagationpolicies"),
        ("get", "list", "watch", "update"),
        "the leader re-evaluates managed policies and writes a switch (or renames an ordered "
        "fill's failover groups to move replicas back) as an update guarded by the "
        "resourceVersion it read",
    ),
    Grant("", ("namespaces",), ("get", "list", "watch"), "which namespaces opted in"),
    Grant(
        "work.karmada.io",
        ("resourcebindings", "clusterresourcebindings"),
        ("get", "list", "watch", "update"),
        "where a managed policy's bindings put the replicas (moving them back), and the "
        "requiredBy snapshot that sends its non-workloads wherever the replicas may go",
    ),
    Grant(
        "apps.karmada.io",
        ("workloadrebalancers",),
        ("create", "get", "list", "watch", "delete"),
        "a Fresh reschedule that moves replicas back to greener tiers (labelled "
        "app.kubernetes.io/managed-by: carbonshift, deleted by Karmada 600 s after it finished)",
    ),
)
EVENTS = (
    "CarbonRebalanced",
    "CarbonFieldReleased",
    "CarbonFieldDropped",
    "CarbonReplicasMoved",
    "CarbonResourcesCarried",
    "CarbonPolicyLazy",
)


def _policy(kind: str, resource: str, *, namespaced: bool) -> Kind:
    return Kind(
        GROUP,
        "v1alpha1",
        kind,
        resource,
        namespaced=namespaced,
        decide=decide,
        scope="policy",
        following=Following(),
        grants=GRANTS,
        events=EVENTS,
    )


PROPAGATION_POLICY = _policy("PropagationPolicy", "propagationpolicies", namespaced=True)
CLUSTER_PROPAGATION_POLICY = _policy(
    "ClusterPropagationPolicy", "clusterpropagationpolicies", namespaced=False
)
