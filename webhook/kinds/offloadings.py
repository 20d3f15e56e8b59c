"""Liqo NamespaceOffloading: offload a namespace's pods to the greenest peers.

Admission narrows ``spec.clusterSelector`` to the greenest remote clusters
(:func:`webhook.decision.liqo.offloading.decide`); the leader follows the grid alike.

Accounting (Liqo's hook, :mod:`webhook.controllers.liqo.pod_accounts`): what the object
decides is where its namespace's pods run remotely, so the leader accounts the pods of the
namespace that run on Liqo virtual nodes, per remote cluster (``liqo.io/remote-cluster-id``),
at their cpu requests, like a policy's replicas: energy is estimated with the coefficient,
never measured, since the leader's Kepler sees the virtual node, not the remote cluster's
machines. The counterfactual spreads the same vCPUs evenly over the remote clusters the
user's own ``clusterSelector`` allows (:func:`counterfactual`), as a NodePool's spreads over
its allowed zones: Liqo's scheduler has no fixed division to replay. Pods running locally
are not the object's doing and are not accounted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.decision.accounting import record_of
from webhook.decision.karmada.division import divide_static
from webhook.decision.labels import Rule
from webhook.decision.liqo import offloading
from webhook.decision.outcome import Decision
from webhook.decision.record import user_view
from webhook.decision.selectors import SelectorError
from webhook.kinds.base import Context, Following, Grant, Kind
from webhook.model.config import ClusterConfig
from webhook.model.objects import mapping

GROUP = "offloading.liqo.io"


def decide(obj: Mapping[str, Any], ctx: Context) -> Decision:
    """The narrowed cluster selector on the peers' current intensities."""
    inputs = offloading.OffloadingInputs(
        ctx.known_peers,
        ctx.table,
        Rule.of(ctx.config),
        ctx.config.hysteresis,
        ctx.now,
    )
    return offloading.decide(obj, inputs)


def user_allows(obj: Mapping[str, Any], peers: Mapping[str, ClusterConfig]) -> list[str]:
    """The remote cluster ids the user's own ``clusterSelector`` allows (what carbonshift
    owns put back; a selector carbonshift cannot judge: none)."""
    spec = user_view(mapping(obj, "spec"), record_of(obj), offloading.OWN)
    try:
        return offloading.allowed(spec.get(offloading.SELECTOR), peers)
    except SelectorError:
        return []


def counterfactual(
    obj: Mapping[str, Any], actual: Mapping[str, int], peers: Mapping[str, ClusterConfig]
) -> dict[str, int]:
    """Millicores per remote cluster had carbonshift left the selector alone: the same
    total spread evenly over the remote clusters the user's selector allows (the actual
    placement when it allows none carbonshift knows)."""
    allowed = user_allows(obj, peers)
    if not allowed:
        return dict(actual)
    return divide_static(sum(actual.values()), dict.fromkeys(allowed, 1))


NAMESPACE_OFFLOADING = Kind(
    GROUP,
    "v1beta1",
    "NamespaceOffloading",
    "namespaceoffloadings",
    namespaced=True,
    decide=decide,
    scope="policy",
    following=Following(fields=offloading.FIELDS, places=lambda ctx: ctx.known_peers),
    grants=(
        Grant(
            GROUP,
            ("namespaceoffloadings",),
            ("get", "list", "watch", "update"),
            "the leader re-evaluates managed NamespaceOffloadings (clusterSelector)",
        ),
        Grant("", ("namespaces",), ("get", "list", "watch"), "which namespaces opted in"),
        Grant(
            "",
            ("pods",),
            ("list",),
            "the accounting reads which pods of an offloaded namespace run on virtual nodes",
        ),
    ),
    events=("CarbonRebalanced", "CarbonFieldReleased"),
)
