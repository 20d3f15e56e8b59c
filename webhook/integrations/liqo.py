"""Liqo: NamespaceOffloadings placed on the greenest remote clusters, read from Liqo's
virtual nodes, which the leader labels with their intensity; the offloadings are accounted
by their namespace's pods running on those virtual nodes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from webhook.controllers.liqo.pod_accounts import OffloadedPods
from webhook.integrations.base import Integration, Run, Wiring
from webhook.kinds import Grant
from webhook.kinds.offloadings import NAMESPACE_OFFLOADING

if TYPE_CHECKING:
    from webhook.controllers.runner import KeyedController


def _labels(w: Wiring) -> Sequence[KeyedController[Any]]:
    from webhook.controllers.labels import NODES, ClusterLabeler  # noqa: PLC0415

    f = w.fleet
    feed = w.world.feed
    return [ClusterLabeler(f.api, w.config, f.peers, feed, f.elector, events=f.events,
                           resource=NODES)]  # fmt: skip


ROW = Integration(
    "liqo",
    kinds=(NAMESPACE_OFFLOADING,),
    runs=(Run("labels", _labels),),
    accounting=(OffloadedPods((NAMESPACE_OFFLOADING,)),),
    grants=(
        Grant(
            "",
            ("nodes",),
            ("get", "list", "watch", "patch"),
            "Liqo's virtual nodes (liqo.io/type=virtual-node) give their remote clusters' zones; "
            "the leader applies their carbonshift.io/* labels and annotations (only those keys)",
        ),
    ),
)
