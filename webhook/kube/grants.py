"""The ClusterRole rules the leader needs besides the handled kinds' own.

Each handled kind declares its rules (:attr:`webhook.kinds.base.Kind.grants`); these are
the fleet's: the inventory and class labels of Karmada Clusters, Liqo's virtual nodes,
Open Cluster Management's scores and Events. ``manifests/base/rbac.yaml`` grants exactly
the union of both (a test holds it), and the chart renders the same rules.
"""

from __future__ import annotations

from webhook.kinds import Grant

FLEET: tuple[Grant, ...] = (
    Grant(
        "cluster.karmada.io",
        ("clusters",),
        ("get", "list", "watch", "patch"),
        "the fleet inventory watches Clusters; the leader applies their carbonshift.io/* "
        "labels and annotations",
    ),
    Grant(
        "",
        ("nodes",),
        ("get", "list", "watch", "patch"),
        "Liqo's virtual nodes: their remote clusters' zones and carbonshift.io/* labels",
    ),
    Grant(
        "cluster.open-cluster-management.io",
        ("managedclusters",),
        ("get", "list"),
        "the ManagedClusters whose AddOnPlacementScore carbonshift keeps",
    ),
    Grant(
        "cluster.open-cluster-management.io",
        ("addonplacementscores",),
        ("list", "create", "patch"),
        "one AddOnPlacementScore carbon per ManagedCluster (server-side apply)",
    ),
    Grant(
        "cluster.open-cluster-management.io",
        ("addonplacementscores/status",),
        ("patch",),
        "the scores themselves",
    ),
    Grant("events.k8s.io", ("events",), ("create", "patch"), "Events that explain changes"),
)
