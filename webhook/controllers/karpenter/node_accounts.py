"""Karpenter's accounting hook: a managed NodePool by the Nodes it launched.

The Nodes labelled with the NodePool's name (``karpenter.sh/nodepool``) are accounted at
their ``status.capacity.cpu``, per topology zone (``topology.kubernetes.io/zone``; its grid
zone: ``nodepools.topology_zones``, else the config's ``zone``); the counterfactual
spreads the same vCPUs evenly over the zones the user's own requirements allow
(:func:`~webhook.decision.karpenter.accounting.nodepool_zones`). With Kepler, a NodePool's
energy is its nodes' joules per zone. Its places are vCPUs per topology zone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

import structlog

from webhook.controllers.accounting import MILLI, Accounted, Managed, Pass
from webhook.decision.accounting import Intensity, account, measured
from webhook.decision.karmada.division import divide_static
from webhook.decision.karpenter.accounting import nodepool_zones
from webhook.decision.quantity import quantity
from webhook.kinds import Context, Kind
from webhook.model.errors import AccountingError
from webhook.model.objects import meta_of, strings

log = structlog.get_logger("carbonshift.accounting")

NODEPOOL_LABEL = "karpenter.sh/nodepool"
ZONE_LABEL = "topology.kubernetes.io/zone"


@dataclasses.dataclass(frozen=True, slots=True)
class Nodes:
    """Accounts the managed objects of :attr:`kinds` (NodePools) by their Nodes' vCPUs per
    topology zone."""

    kinds: tuple[Kind, ...]
    replicas: bool = dataclasses.field(default=False, init=False)

    async def account(self, books: Pass, managed: Sequence[Managed]) -> Sequence[Accounted]:
        nodes = await books.nodes(NODEPOOL_LABEL)
        if nodes is None:
            return []
        config = books.config
        topology = dict(config.nodepools.topology_zones)
        millicores: dict[str, dict[str, int]] = {}
        joules: dict[str, dict[str, float]] = {}
        for node in nodes:
            labels = strings(node.metadata.labels)
            owner_pool, zone = labels.get(NODEPOOL_LABEL), labels.get(ZONE_LABEL) or "local"
            cpu = quantity(strings(node.status.capacity if node.status else None).get("cpu"))
            if owner_pool and cpu is not None and cpu > 0:
                per = millicores.setdefault(str(owner_pool), {})
                per[zone] = per.get(zone, 0) + int(cpu * 1000)
                used = joules.setdefault(str(owner_pool), {})
                used[zone] = used.get(zone, 0.0) + books.node_joules.get(node.metadata.name, 0.0)
        out: list[Accounted] = []
        for kind, pool in managed:
            name = meta_of(pool).name
            actual = millicores.get(name)
            if not actual:
                continue
            places = set(actual) | set(topology)
            intensities = _zone_intensities(books.ctx, places, topology, config.zone)
            allowed = nodepool_zones(pool, topology)
            counterfactual = (
                divide_static(sum(actual.values()), dict.fromkeys(allowed, 1))
                if allowed
                else actual
            )
            try:
                interval = account(
                    actual,
                    counterfactual,
                    intensities,
                    vcpu_per_replica=MILLI,
                    hours=books.hours,
                    coefficients=books.coefficients,
                    joules=measured(joules.get(name, {}), actual) if books.node_joules else None,
                )
            except AccountingError as exc:
                log.info("accounting_skipped", nodepool=name, reason=str(exc))
                continue
            vcpus = {z: m * MILLI for z, m in actual.items()}
            out.append(Accounted((kind.kind, "", name), interval, vcpus))
        return out


def _zone_intensities(
    ctx: Context, places: Iterable[str], topology: Mapping[str, str], local: str | None
) -> dict[str, Intensity]:
    """Topology zone -> the intensity of its grid zone (``local``: the config's zone)."""
    out = {}
    for place in places:
        zone = topology.get(place) or local
        reading = ctx.table.get(zone) if zone else None
        if reading is not None:
            out[place] = Intensity(reading.value, reading.signal, reading.source)
    return out
