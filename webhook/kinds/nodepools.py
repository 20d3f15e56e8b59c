"""Karpenter NodePool: carbon settings for the cluster's own nodes.

Admission applies the pool's strategies (``price``, ``ladder``, ``pause``, ``efficiency``,
``weight``, ``zones``; :func:`webhook.decision.karpenter.nodepool.decide`) on the local grid; the
leader pauses and resumes the pool over time (``spec.limits``, ``spec.weight``) with the
feed's outlook over the pool's ``max-pause``, and keeps the carbon price NodeOverlays.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from webhook.decision.karpenter import nodepool, nodepool_step
from webhook.decision.karpenter.carbonprice import NODE_OVERLAY
from webhook.decision.outcome import Decision
from webhook.kinds.base import Context, Following, Grant, Kind, Tally
from webhook.model.config import Config
from webhook.model.intensity import IntensityTable

GROUP = "karpenter.sh"


def _inputs(
    obj: Mapping[str, Any],
    ctx: Context,
    table: IntensityTable,
    outlook: Sequence[float] | None = None,
) -> nodepool.NodePoolInputs:
    return nodepool.NodePoolInputs(
        ctx.local_zone,
        table,
        ctx.config.nodepools,
        outlook=outlook,
        other_pools=ctx.other_pools(obj),
    )


def decide(obj: Mapping[str, Any], ctx: Context) -> Decision:
    """The pool's strategies on the local grid's current reading."""
    return nodepool.decide(obj, _inputs(obj, ctx, ctx.table))


def decide_over_time(
    obj: Mapping[str, Any], table: IntensityTable, ctx: Context, outlook: Sequence[float] | None
) -> Decision:
    """The re-evaluation's decision: on ``table`` with the local zone's outlook."""
    return nodepool.reevaluate(obj, _inputs(obj, ctx, table, outlook), ctx.now)


def every_update(config: Config) -> bool:
    """``nodepools.mutate_on_update``: every UPDATE is decided again."""
    return config.nodepools.mutate_on_update


NODEPOOL = Kind(
    GROUP,
    "v1",
    "NodePool",
    "nodepools",
    namespaced=False,
    decide=decide,
    scope="nodepool",
    every_update=every_update,
    following=Following(
        rules=nodepool_step.RULES,
        fields=nodepool_step.NODEPOOL_FIELDS,
        local=decide_over_time,
        events={"paused": ("NodePoolPaused", "Pause"), "resumed": ("NodePoolResumed", "Resume")},
        tally=Tally(
            "carbonshift_paused_nodepools",
            "Managed NodePools carbonshift holds paused (limits.cpu 0), as of the leader's "
            "last pass.",
            nodepool_step.paused,
        ),
    ),
    grants=(
        Grant(
            GROUP,
            ("nodepools",),
            ("get", "list", "watch", "update"),
            "the leader's re-evaluation pauses and resumes NodePools (spec.limits, spec.weight)",
        ),
        Grant(
            NODE_OVERLAY.group,
            (NODE_OVERLAY.plural,),
            ("list", "watch", "create", "update", "delete"),
            "strategy price keeps the carbon price NodeOverlays (labelled "
            "carbonshift.io/overlay: price, watched; it never touches any other overlay)",
        ),
        Grant(
            "",
            ("nodes",),
            ("get", "list", "watch"),
            "the local grid zone from the Nodes' region label and providerID",
        ),
    ),
    events=(
        "NodePoolPaused",
        "NodePoolResumed",
        "CarbonFieldReleased",
        "CarbonPriceChanged",
        "CarbonPriceLeft",
        "CarbonPriceNotApplied",
        "CarbonZoneUnknown",
    ),
)
