"""Karmada's accounting hook: a managed (Cluster)PropagationPolicy by its ResourceBindings.

Each binding a managed policy made (``spec.clusters``: replicas per member cluster;
``spec.replicas``, ``replicaRequirements`` cpu per replica) is accounted for the policy, at
the intensity of each member cluster's grid zone; the counterfactual divides the same
replicas as the user's own placement would
(:func:`~webhook.decision.karmada.accounting.counterfactual_placement`, room from the
Clusters' resource summaries). Its energy is measured (method ``kepler``) when Kepler
covers every cluster the workload's replicas ran in, else estimated. Its places are
replicas on member clusters: the fleet's replicas gauge counts them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import structlog

from webhook.controllers.accounting import Accounted, Managed, Obj, Pass
from webhook.decision.accounting import Interval, account, measured, workload_joules
from webhook.decision.karmada.accounting import counterfactual_placement
from webhook.decision.karmada.bindings import (
    BINDINGS,
    CLUSTERS,
    owner,
    placed,
    requests,
    resource_summaries,
    workload,
)
from webhook.decision.karmada.capacity import room
from webhook.decision.ledger import ObjectKey
from webhook.decision.quantity import quantity
from webhook.kinds import Kind
from webhook.model.errors import AccountingError
from webhook.model.objects import dig, mapping, meta_of

log = structlog.get_logger("carbonshift.accounting")


@dataclasses.dataclass(frozen=True, slots=True)
class Bindings:
    """Accounts the managed objects of :attr:`kinds` (Karmada policies) by the replicas
    their ResourceBindings place per member cluster."""

    kinds: tuple[Kind, ...]
    replicas: bool = dataclasses.field(default=True, init=False)

    async def account(self, books: Pass, managed: Sequence[Managed]) -> Sequence[Accounted]:
        policies: dict[ObjectKey, Obj] = {}
        for kind, policy in managed:
            meta = meta_of(policy)
            policies[kind.kind, meta.namespace, meta.name] = policy
        summaries = resource_summaries(await books.objects(CLUSTERS))
        out: list[Accounted] = []
        for bindings in BINDINGS:
            for binding in await books.objects(bindings):
                made_by = owner(binding)
                if made_by is None or made_by not in policies:
                    continue
                got = _binding(books, policies[made_by], binding, summaries)
                if got is not None:
                    out.append(Accounted(made_by, *got))
        return out


def _binding(
    books: Pass,
    policy: Mapping[str, Any],
    binding: Mapping[str, Any],
    summaries: Mapping[str, object],
) -> tuple[Interval, Mapping[str, float]] | None:
    """The interval of one binding of ``policy`` and its replicas per member cluster; None
    when nothing is placed, there is no cpu request, or it cannot be accounted."""
    actual = placed(binding)
    if not actual:
        return None
    need = requests(binding)
    cpu = quantity(need.get("cpu"))
    if cpu is None or cpu <= 0:
        return None  # no cpu request: no energy to estimate
    spec = mapping(binding, "spec")
    replicas = spec.get("replicas")
    if not isinstance(replicas, int) or replicas <= 0:
        replicas = sum(actual.values())
    target = workload(binding)
    uid = str(dig(spec, "resource", "uid") or "") if target else ""
    room_now = {
        name: (room(summary, need) or 0) + actual.get(name, 0)
        for name, summary in summaries.items()
    }
    counterfactual = counterfactual_placement(policy, replicas, uid=uid, room=room_now)
    joules = None
    if target is not None and books.pod_joules:
        _, kind, namespace, name = target
        joules = measured(workload_joules(books.pod_joules, kind, namespace, name), actual)
    try:
        interval = account(
            actual,
            actual if counterfactual is None else counterfactual,
            books.intensities,
            vcpu_per_replica=float(cpu),
            hours=books.hours,
            coefficients=books.coefficients,
            joules=joules,
        )
    except AccountingError as exc:
        log.info("accounting_skipped", binding=meta_of(binding).namespaced_name, reason=str(exc))
        return None
    return interval, actual
