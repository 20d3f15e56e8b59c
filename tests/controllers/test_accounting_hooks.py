"""The accounting loop runs the hooks it is handed, naming no technology: each pass lists
the managed objects of every hook's kinds, hands a hook with any the pass's inputs, and
adds what it answers to the ledger and the metrics (the fleet's replicas only from hooks
whose places are replicas); a hook whose kinds have no managed object is not asked, and
the rows hand the accountant every hook they carry, in row order."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import timedelta

import pytest
from kubernetes_asyncio import client

from tests import kubeapi
from tests.controllers.accounting_world import (
    KWH,
    NAMESPACE,
    Clock,
    context,
    kube,
    no_series,
    nodepool,
    persisted,
    sample,
    seed,
)
from webhook import integrations
from webhook.controllers.accounting import Accountant, Accounted, Accounts, Managed, Pass
from webhook.decision.accounting import account
from webhook.kinds import Kind
from webhook.kinds.nodepools import NODEPOOL
from webhook.kinds.offloadings import NAMESPACE_OFFLOADING
from webhook.model.config import parse
from webhook.model.objects import meta_of
from webhook.runtime import metrics

__all__ = ["kube", "no_series"]  # fixtures used by name


@dataclasses.dataclass
class OneReplicaOnGreen:
    """A hook that accounts each managed object as one replica of 0.5 vCPU on green,
    against one on dirty, and notes what it was handed."""

    kinds: tuple[Kind, ...]
    replicas: bool = True
    handed: list[tuple[Pass, list[str]]] = dataclasses.field(default_factory=list)

    async def account(self, books: Pass, managed: Sequence[Managed]) -> Sequence[Accounted]:
        self.handed.append((books, [f"{k.kind}/{meta_of(o).name}" for k, o in managed]))
        out = []
        for kind, obj in managed:
            interval = account(
                {"green": 1}, {"dirty": 1}, books.intensities, vcpu_per_replica=0.5,
                hours=books.hours, coefficients=books.coefficients,
            )  # fmt: skip
            out.append(Accounted((kind.kind, "", meta_of(obj).name), interval, {"green": 1}))
        return out


def accountant(api: client.ApiClient, clock: Clock, *hooks: Accounts) -> Accountant:
    config = parse({})
    return Accountant(
        api, config, lambda: context(config), kubeapi.Gate(), namespace=NAMESPACE,
        accounts=hooks, clock=clock,
    )  # fmt: skip


async def test_the_loop_adds_what_each_hook_answers(kube: kubeapi.KubeApi) -> None:
    undecided = nodepool("plain")
    del undecided["metadata"]["annotations"]
    seed(kube, nodepool("batch"), undecided)
    pools = OneReplicaOnGreen((NODEPOOL,))
    offloadings = OneReplicaOnGreen((NAMESPACE_OFFLOADING,))
    clock = Clock()
    leader = accountant(kube.api, clock, pools, offloadings)
    assert await leader.account() == 0  # the first pass only sets the start
    clock.now += timedelta(seconds=300)
    assert await leader.account() == 1
    ((books, managed),) = pools.handed  # once: the first pass accounts nothing
    assert managed == ["NodePool/batch"]  # the managed objects only
    assert books.hours == pytest.approx(300 / 3600)
    assert set(books.intensities) == {"green", "dirty"}
    assert offloadings.handed == []  # no managed NamespaceOffloading: not asked
    ledger = persisted(kube)
    totals = ledger.objects["NodePool//batch"].totals["average/coefficient"]
    assert totals.grams == pytest.approx(KWH * 25)
    assert totals.counterfactual_grams == pytest.approx(KWH * 800)
    assert ledger.series[-1]["r"] == {"green": 1}
    assert sample(metrics.ACCOUNTED_REPLICAS, cluster="green") == 1
    leader.forget()


async def test_places_that_are_not_replicas_leave_the_fleets_replicas(
    kube: kubeapi.KubeApi,
) -> None:
    seed(kube, nodepool("batch"))
    clock = Clock()
    leader = accountant(kube.api, clock, OneReplicaOnGreen((NODEPOOL,), replicas=False))
    await leader.account()
    clock.now += timedelta(seconds=300)
    assert await leader.account() == 1
    assert persisted(kube).series[-1]["r"] == {}
    assert sample(metrics.ACCOUNTED_REPLICAS, cluster="green") == 0
    leader.forget()


async def test_without_hooks_the_loop_reads_nothing_but_its_ledger(
    kube: kubeapi.KubeApi,
) -> None:
    seed(kube, nodepool("batch"))
    clock = Clock()
    leader = accountant(kube.api, clock)
    await leader.account()
    clock.now += timedelta(seconds=300)
    assert await leader.account() == 0
    assert {c.where.resource for c in kube.calls()} == {"configmaps"}
    leader.forget()


def test_each_rows_hooks_account_its_own_kinds_once() -> None:
    rows = integrations.INTEGRATIONS
    accounted = [(k.group, k.kind) for row in rows for h in row.accounting for k in h.kinds]
    assert len(accounted) == len(set(accounted))
    for row in rows:
        own = {(k.group, k.kind) for k in row.kinds}
        for hook in row.accounting:
            assert {(k.group, k.kind) for k in hook.kinds} <= own, row.name
    assert integrations.accounts() == tuple(
        h for row in integrations.INTEGRATIONS for h in row.accounting
    )
