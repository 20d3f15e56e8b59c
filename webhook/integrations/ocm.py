"""Open Cluster Management: one AddOnPlacementScore ``carbon`` per ManagedCluster, which
Placements prioritize on."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from webhook.integrations.base import Integration, Run, Wiring
from webhook.kinds import Grant

if TYPE_CHECKING:
    from webhook.controllers.runner import KeyedController


def _scores(w: Wiring) -> Sequence[KeyedController[Any]]:
    from webhook.controllers.ocm.scores import PlacementScorer  # noqa: PLC0415

    f = w.fleet
    return [PlacementScorer(f.api, w.config, w.world.feed, f.elector)]


ROW = Integration(
    "ocm",
    runs=(Run("ocm", _scores),),
    grants=(
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
    ),
)
