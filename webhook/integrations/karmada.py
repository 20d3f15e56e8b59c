"""Karmada: the (Cluster)PropagationPolicies admission and the leader place by carbon, the
Clusters' intensity labels, the non-workloads carried to every cluster replicas may use,
what the Karmada policy CRDs keep (which placement shape carbonshift writes), and the
policies' accounting by their ResourceBindings' replicas."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from webhook.controllers.karmada.binding_accounts import Bindings
from webhook.integrations.base import Integration, Run, Wiring
from webhook.kinds import Grant
from webhook.kinds.policies import CLUSTER_PROPAGATION_POLICY, PROPAGATION_POLICY

if TYPE_CHECKING:
    from webhook.controllers.follower import Follower
    from webhook.controllers.karmada.rebalancer import Watched
    from webhook.controllers.keeper import Keeper
    from webhook.controllers.runner import KeyedController


def _labels(w: Wiring) -> Sequence[KeyedController[Any]]:
    from webhook.controllers.labels import ClusterLabeler  # noqa: PLC0415

    f = w.fleet
    return [ClusterLabeler(f.api, w.config, f.inventory, w.world.feed, f.elector, events=f.events)]


def _watched(w: Wiring) -> Watched:
    """The Karmada caches the rebalancer and the carrier share (one per application)."""
    from webhook.controllers.karmada.rebalancer import Watched  # noqa: PLC0415

    shared = w.fleet.shared
    if "karmada" not in shared:
        shared["karmada"] = Watched()
    found: Watched = shared["karmada"]
    return found


def _carry(w: Wiring) -> Sequence[KeyedController[Any]]:
    from webhook.controllers.karmada.carrier import Carrier  # noqa: PLC0415

    f = w.fleet
    return [Carrier(f.api, w.config, f.elector, events=f.events, watched=_watched(w))]


def _rebalancing(follower: Follower, w: Wiring) -> Keeper | None:
    """The moves back to greener tiers and the lazy policies' count, while policies are
    followed."""
    from webhook.controllers.karmada.rebalancer import Rebalancing  # noqa: PLC0415

    if not any(t.row.kind in Rebalancing.kinds for t in follower.targets):
        return None
    inventory = w.fleet.inventory
    return Rebalancing(follower, rooms=lambda: inventory.rooms, watched=_watched(w))


KINDS = (PROPAGATION_POLICY, CLUSTER_PROPAGATION_POLICY)

ROW = Integration(
    "karmada",
    kinds=KINDS,
    runs=(Run("labels", _labels), Run("carry", _carry)),
    keepers=(_rebalancing,),
    accounting=(Bindings(KINDS),),
    grants=(
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
    ),
    events={"IntensityClassChanged": "Karmada Cluster", "IntensityDataMissing": "Karmada Cluster"},
)
