"""Karpenter: NodePools paused, resumed and steered to greener instances by carbon, with
carbon prices on NodeOverlays (kept by the leader's re-evaluation), accounted by the vCPUs
of the Nodes they launched."""

from __future__ import annotations

from typing import TYPE_CHECKING

from webhook.controllers.karpenter.node_accounts import Nodes
from webhook.integrations.base import Integration, Wiring
from webhook.kinds.nodepools import NODEPOOL

if TYPE_CHECKING:
    from webhook.controllers.follower import Follower
    from webhook.controllers.keeper import Keeper


def _pricing(follower: Follower, w: Wiring) -> Keeper | None:
    """The carbon prices on NodeOverlays, while NodePools are followed."""
    from webhook.controllers.karpenter.prices import Pricing  # noqa: PLC0415

    if not any(t.row.kind in Pricing.kinds for t in follower.targets):
        return None
    return Pricing(follower, cache=w.fleet.overlays)


ROW = Integration(
    "karpenter", kinds=(NODEPOOL,), keepers=(_pricing,), accounting=(Nodes((NODEPOOL,)),)
)
