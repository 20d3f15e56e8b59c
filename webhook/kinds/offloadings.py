"""Liqo NamespaceOffloading: offload a namespace's pods to the greenest peers.

Admission narrows ``spec.clusterSelector`` to the greenest remote clusters
(:func:`webhook.decision.offloading.decide`); the leader follows the grid alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.decision import offloading
from webhook.decision.hysteresis import Hysteresis
from webhook.decision.labels import Rule
from webhook.decision.outcome import Decision
from webhook.kinds.base import Context, Following, Grant, Kind

GROUP = "offloading.liqo.io"


def decide(obj: Mapping[str, Any], ctx: Context) -> Decision:
    """The narrowed cluster selector on the peers' current intensities."""
    h = ctx.config.hysteresis
    inputs = offloading.OffloadingInputs(
        ctx.peers or {},
        ctx.table,
        Rule.of(ctx.config),
        Hysteresis(margin=h.margin, dwell_hours=h.dwell_hours),
        ctx.now,
    )
    return offloading.decide(obj, inputs)


NAMESPACE_OFFLOADING = Kind(
    GROUP,
    "v1beta1",
    "NamespaceOffloading",
    "namespaceoffloadings",
    namespaced=True,
    decide=decide,
    scope="policy",
    following=Following(fields=offloading.FIELDS, places=lambda ctx: ctx.peers or {}),
    grants=(
        Grant(
            GROUP,
            ("namespaceoffloadings",),
            ("get", "list", "watch", "update"),
            "the leader re-evaluates managed NamespaceOffloadings (clusterSelector)",
        ),
        Grant("", ("namespaces",), ("get", "list", "watch"), "which namespaces opted in"),
    ),
    events=("CarbonRebalanced", "CarbonFieldReleased"),
)
