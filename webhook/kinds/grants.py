"""What the product needs besides the handled kinds: ClusterRole rules and Event reasons.

Each handled kind declares its own rules (:attr:`webhook.kinds.base.Kind.grants`) and
Event reasons (:attr:`~webhook.kinds.base.Kind.events`); these are the fleet's: the
inventory and class labels of Karmada Clusters, the Karmada policy CRDs, Liqo's virtual
nodes, Open Cluster Management's scores and the Events themselves. The ClusterRole of
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
        "apiextensions.k8s.io",
        ("customresourcedefinitions",),
        ("get", "list", "watch"),
        "what the Karmada policy API keeps: the propagationpolicies and "
        "clusterpropagationpolicies CRDs' schemas say whether overflowAffinities are stored "
        "(Karmada 1.18 on) or pruned, and so which placement shape carbonshift writes "
        "(each listed and watched by name)",
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
        ("get", "list", "watch"),
        "Open Cluster Management (docs/ocm.md): the ManagedClusters whose "
        "AddOnPlacementScore carbonshift keeps",
    ),
    Grant(
        "cluster.open-cluster-management.io",
        ("addonplacementscores",),
        ("list", "watch", "create", "patch"),
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
        "kueue.x-k8s.io",
        ("clusterqueues", "admissionchecks", "multikueueclusters", "localqueues"),
        ("get", "list"),
        "Kueue MultiKueue (docs/kueue.md, kueue.enabled): the manager's queues and checks and "
        "the workers its MultiKueueClusters name (their kubeconfig Secrets: a Role in Kueue's "
        "namespace)",
    ),
    Grant(
        "kueue.x-k8s.io",
        ("workloads",),
        ("get", "list", "patch"),
        "the Workloads carbonshift nominates workers for or holds for a carbon window, and "
        "their carbonshift.io/decision annotation (server-side apply, only that key)",
    ),
    Grant(
        "kueue.x-k8s.io",
        ("workloads/status",),
        ("patch",),
        "status.nominatedClusterNames (applied as Kueue's admission, field manager "
        "kueue-admission) and the carbon window's status.admissionChecks entry",
    ),
    Grant(
        "kueue.x-k8s.io",
        ("admissionchecks/status",),
        ("patch",),
        "the carbon window AdmissionChecks' Active condition",
    ),
    Grant(
        "kueue.x-k8s.io",
        ("multikueueconfigs",),
        ("get", "list", "update"),
        "dispatch: order writes opted-in MultiKueueConfigs' spec.clusters in carbon order, an "
        "update guarded by the resourceVersion it read",
    ),
    Grant(
        "carbonshift.io",
        ("carbonwindows",),
        ("get", "list"),
        "the carbon window's parameters (CarbonWindow: the default max-delay of a check)",
    ),
    Grant(
        "batch",
        ("jobs",),
        ("get",),
        "the Job owning a Kueue Workload: its carbonshift.io/max-delay and expected-runtime",
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

FLEET_EVENTS: dict[str, str] = {
    "IntensityClassChanged": "Karmada Cluster",
    "IntensityDataMissing": "Karmada Cluster",
    "CarbonDispatched": "Kueue Workload",
    "CarbonWindowPending": "Kueue Workload",
    "CarbonWindowReady": "Kueue Workload",
    "CarbonOrderChanged": "MultiKueueConfig",
}
"""Event reasons recorded about no handled kind, and on what: a Karmada Cluster's intensity
class changed, or its grid zone has no data (:mod:`webhook.controllers.labels`); a Kueue
Workload nominated to workers, held for or released by its carbon window; a
MultiKueueConfig put in carbon order (:mod:`webhook.controllers.kueue_dispatch`,
:mod:`webhook.controllers.carbon_window`)."""
