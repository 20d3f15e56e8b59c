"""What the product needs besides the handled kinds: ClusterRole rules and Event reasons.

Each handled kind declares its own rules (:attr:`webhook.kinds.base.Kind.grants`) and
Event reasons (:attr:`~webhook.kinds.base.Kind.events`); these are the fleet's: the
inventory and class labels of Karmada Clusters, Liqo's virtual nodes, Open Cluster
Management's scores and the Events themselves. The ClusterRole of
``manifests/base/rbac.yaml`` and of the chart is generated from both
(:meth:`webhook.kinds.Registry.cluster_role`, ``make generate``), each rule under its
reasons.
"""

from __future__ import annotations

from webhook.kinds.base import Grant

FLEET: tuple[Grant, ...] = (
    Grant(
        "cluster.karmada.io",
        ("clusters",),
        ("get", "list", "watch", "patch"),
        "the fleet inventory watches Clusters; the leader applies their carbonshift.io/* "
        "labels and annotations (server-side apply, field manager carbonshift: RBAC cannot "
        "narrow a patch to fields, the apply sends only those keys)",
    ),
    Grant(
        "",
        ("nodes",),
        ("get", "list", "watch", "patch"),
        "Liqo's virtual nodes (liqo.io/type=virtual-node) give their remote clusters' zones; "
        "the leader applies their carbonshift.io/* labels and annotations (only those keys)",
    ),
    Grant(
        "cluster.open-cluster-management.io",
        ("managedclusters",),
        ("get", "list"),
        "Open Cluster Management (docs/ocm.md): the ManagedClusters whose "
        "AddOnPlacementScore carbonshift keeps",
    ),
    Grant(
        "cluster.open-cluster-management.io",
        ("addonplacementscores",),
        ("list", "create", "patch"),
        "one AddOnPlacementScore carbon per ManagedCluster, in its namespace (labelled "
        "app.kubernetes.io/managed-by: carbonshift; server-side apply creates it)",
    ),
    Grant(
        "cluster.open-cluster-management.io",
        ("addonplacementscores/status",),
        ("patch",),
        "the scores themselves (the AddOnPlacementScore's status)",
    ),
    Grant(
        "events.k8s.io",
        ("events",),
        ("create", "patch"),
        "Events that explain each change: about Clusters and NodePools in default, about "
        "namespaced objects in theirs",
    ),
)
"""The ClusterRole rules the leader needs besides the handled kinds' own."""

FLEET_EVENTS: tuple[str, ...] = ("IntensityClassChanged", "IntensityDataMissing")
"""Event reasons recorded about no handled kind: a Karmada Cluster's intensity class
changed, or its grid zone has no data (:mod:`webhook.controllers.labels`)."""
