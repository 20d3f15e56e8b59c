"""Liqo's accounting hook: a managed NamespaceOffloading by its namespace's offloaded pods.

The Running pods of the object's namespace on Liqo virtual nodes
(``liqo.io/type=virtual-node``) are accounted per remote cluster
(``liqo.io/remote-cluster-id``, its grid zone as the peers give it), at their containers'
cpu requests; the counterfactual spreads the same vCPUs evenly over the remote clusters
the user's own ``clusterSelector`` allows (:func:`webhook.kinds.offloadings.counterfactual`).
Its energy is always estimated: the leader's Kepler does not see the remote clusters'
machines. Pods running locally are not the object's doing and are not accounted. Its
places are pods per remote cluster.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from decimal import Decimal

import structlog

from webhook.controllers.accounting import MILLI, Accounted, Managed, Pass, intensities
from webhook.decision.accounting import account
from webhook.decision.liqo.peers import REMOTE_ID_LABEL
from webhook.decision.liqo.peers import SELECTOR as VIRTUAL_NODES
from webhook.decision.quantity import quantity
from webhook.kinds import Kind
from webhook.kinds.offloadings import counterfactual as offloaded_counterfactual
from webhook.model.errors import AccountingError
from webhook.model.objects import items, meta_of, strings

log = structlog.get_logger("carbonshift.accounting")


@dataclasses.dataclass(frozen=True, slots=True)
class OffloadedPods:
    """Accounts the managed objects of :attr:`kinds` (NamespaceOffloadings) by the cpu
    requests of their namespace's pods running on virtual nodes, per remote cluster."""

    kinds: tuple[Kind, ...]
    replicas: bool = dataclasses.field(default=False, init=False)

    async def account(self, books: Pass, managed: Sequence[Managed]) -> Sequence[Accounted]:
        virtual = await books.nodes(VIRTUAL_NODES)
        if virtual is None:
            return []
        remote = {
            node.metadata.name: str(cluster_id)
            for node in virtual
            if (cluster_id := strings(node.metadata.labels).get(REMOTE_ID_LABEL))
        }
        peers = books.ctx.known_peers
        places = intensities(peers, books.ctx)
        out: list[Accounted] = []
        for kind, obj in managed:
            meta = meta_of(obj)
            got = await _offloaded_pods(books, meta.namespace, remote)
            if got is None:
                return out
            millicores, pods = got
            if not millicores:
                continue
            try:
                interval = account(
                    millicores,
                    offloaded_counterfactual(obj, millicores, peers),
                    places,
                    vcpu_per_replica=MILLI,
                    hours=books.hours,
                    coefficients=books.coefficients,
                )
            except AccountingError as exc:
                log.info("accounting_skipped", offloading=meta.namespaced_name, reason=str(exc))
                continue
            out.append(Accounted((kind.kind, meta.namespace, meta.name), interval, pods))
        return out


async def _offloaded_pods(
    books: Pass, namespace: str, remote: Mapping[str, str]
) -> tuple[dict[str, int], dict[str, float]] | None:
    """Millicores requested and pods per remote cluster of the Running pods of
    ``namespace`` on virtual nodes; None when the pods cannot be listed."""
    listed = await books.pods(namespace)
    if listed is None:
        return None
    millicores: dict[str, int] = {}
    pods: dict[str, float] = {}
    for pod in listed:
        cluster_id = remote.get((pod.spec.node_name if pod.spec else None) or "")
        if cluster_id is None or (pod.status.phase if pod.status else None) != "Running":
            continue
        cpu = sum(
            (
                quantity(strings(c.resources.requests if c.resources else None).get("cpu"))
                or Decimal(0)
                for c in items(pod.spec.containers)
            ),
            Decimal(0),
        )
        if cpu <= 0:
            continue  # no cpu request: no energy to estimate
        millicores[cluster_id] = millicores.get(cluster_id, 0) + int(cpu * 1000)
        pods[cluster_id] = pods.get(cluster_id, 0) + 1
    return millicores, pods
