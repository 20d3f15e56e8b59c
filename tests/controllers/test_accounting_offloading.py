"""The accounting of Liqo NamespaceOffloadings against the in-process API server: the
Running pods of the offloaded namespace on virtual nodes, per remote cluster, at their cpu
requests, against the same vCPUs spread evenly over the remote clusters the user's own
``clusterSelector`` allows; pods on local nodes, pending pods and pods without a cpu
request are not counted; the energy is always estimated."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests import kubeapi
from tests.controllers.accounting_world import (
    KWH,
    NAMESPACE,
    VALUES,
    Clock,
    kube,
    no_series,
    persisted,
    seed,
)
from tests.support import NOW, reading
from webhook import integrations, kinds
from webhook.controllers.accounting import Accountant
from webhook.controllers.liqo.pod_accounts import OffloadedPods
from webhook.decision.liqo import offloading
from webhook.decision.liqo.peers import REMOTE_ID_LABEL, TYPE_LABEL, VIRTUAL_NODE
from webhook.decision.record import Record, fingerprint
from webhook.integrations import EVENT_REASONS, liqo
from webhook.kinds import Context
from webhook.kube import reads
from webhook.model.config import ClusterConfig, parse
from webhook.model.vocabulary import DECISION
from webhook.runtime import metrics

__all__ = ["kube", "no_series"]  # fixtures used by name

PEERS = {
    "green-id": ClusterConfig(name="green-id", zone="SE-SE3", labels={"tier": "a"}),
    "dirty-id": ClusterConfig(name="dirty-id", zone="PL", labels={"tier": "b"}),
}
KEY = "NamespaceOffloading/shop/offloading"


def namespace_offloading(user: dict[str, Any] | None = None) -> dict[str, Any]:
    """A NamespaceOffloading carbonshift narrowed to green-id (``user``: the selector the
    user wrote; None: none, every remote cluster)."""
    written = offloading.narrowed(user, ["green-id"])
    record = Record(
        body={"peers": {"green-id": {"zone": "SE-SE3"}, "dirty-id": {"zone": "PL"}}},
        orig={"offloading.clusterSelector": user},
        own={"offloading.clusterSelector": fingerprint(written)},
    )
    return {
        "apiVersion": "offloading.liqo.io/v1beta1",
        "kind": "NamespaceOffloading",
        "metadata": {
            "name": "offloading",
            "namespace": "shop",
            "annotations": {DECISION: record.encode()},
        },
        "spec": {"podOffloadingStrategy": "LocalAndRemote", "clusterSelector": written},
    }


def node(name: str, cluster_id: str | None = None) -> dict[str, Any]:
    labels = {TYPE_LABEL: VIRTUAL_NODE, REMOTE_ID_LABEL: cluster_id} if cluster_id else {}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


def pod(name: str, on: str, cpu: str | None = "500m", phase: str = "Running") -> dict[str, Any]:
    resources = {"requests": {"cpu": cpu}} if cpu else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {
            "nodeName": on,
            "containers": [{"name": "c", "image": "x", "resources": resources}],
        },
        "status": {"phase": phase},
    }


def accountant(api: Any, clock: Clock) -> Accountant:
    config = parse({"zone": "SE-SE3"})

    def context() -> Context:
        table = {z: reading(z, v) for z, v in VALUES.items()}
        return Context(config, table, NOW, fleet={}, peers=PEERS)

    return Accountant(
        api, config, context, kubeapi.Gate(), namespace=NAMESPACE,
        accounts=integrations.accounts(), clock=clock,
    )  # fmt: skip


def world(kube: kubeapi.KubeApi, user: dict[str, Any] | None = None) -> None:
    seed(
        kube,
        namespace_offloading(user),
        node("liqo-green", "green-id"),
        node("liqo-dirty", "dirty-id"),
        node("local-1"),
        pod("a", "liqo-green"),
        pod("b", "liqo-green"),
        pod("waiting", "liqo-green", phase="Pending"),
        pod("here", "local-1"),
        pod("no-request", "liqo-green", cpu=None),
    )


async def two_passes(kube: kubeapi.KubeApi) -> Accountant:
    clock = Clock()
    leader = accountant(kube.api, clock)
    leader.forget()
    assert await leader.account() == 0
    clock.now += timedelta(seconds=300)
    assert await leader.account() == 1
    return leader


def test_namespace_offloadings_are_accounted_by_their_offloaded_pods() -> None:
    offloaded = [h for h in integrations.accounts() if isinstance(h, OffloadedPods)]
    assert offloaded == list(liqo.ROW.accounting)
    assert [k.kind for h in offloaded for k in h.kinds] == ["NamespaceOffloading"]
    assert {k.kind for k in integrations.accounted()} == {k.kind for k in kinds.KINDS}


async def test_the_offloaded_pods_count_against_every_remote_cluster_the_user_allows(
    kube: kubeapi.KubeApi,
) -> None:
    world(kube)
    await two_passes(kube)
    entry = persisted(kube).objects[KEY]
    totals = entry.totals["average/coefficient"]
    # Actual: two pods of 0.5 vCPU on green-id (25 g/kWh). Counterfactual: the user's
    # selector (none) allows both remote clusters: 0.5 vCPU each, one on dirty-id (800).
    assert totals.kwh == pytest.approx(2 * KWH)
    assert totals.grams == pytest.approx(2 * KWH * 25)
    assert totals.counterfactual_grams == pytest.approx(KWH * 25 + KWH * 800)
    assert totals.avoided_grams == pytest.approx(KWH * 775)
    assert set(entry.places) == {"green-id", "dirty-id"}
    assert entry.places["green-id"]["rh"] == pytest.approx(2 * 300 / 3600)  # pod-hours
    assert entry.places["dirty-id"]["cf_g"] == pytest.approx(KWH * 800)
    labels = {"kind": "NamespaceOffloading", "namespace": "shop", "name": "offloading"}
    assert any(
        s.labels == {**labels, "signal": "average", "method": "coefficient"} and s.value > 0
        for family in metrics.EMISSIONS_GRAMS.collect()
        for s in family.samples
    )


async def test_the_users_own_selector_bounds_the_counterfactual(kube: kubeapi.KubeApi) -> None:
    only_a = {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "tier", "operator": "In", "values": ["a"]}]}]}  # fmt: skip
    world(kube, only_a)
    await two_passes(kube)
    totals = persisted(kube).objects[KEY].totals["average/coefficient"]
    assert totals.counterfactual_grams == pytest.approx(totals.grams)
    assert totals.avoided_grams == pytest.approx(0.0)


async def test_pods_it_may_not_list_account_nothing(kube: kubeapi.KubeApi) -> None:
    world(kube)
    kube.fail("GET", "pods", 403, times=5)
    clock = Clock()
    leader = accountant(kube.api, clock)
    await leader.account()
    clock.now += timedelta(seconds=300)
    assert await leader.account() == 0
    assert KEY not in persisted(kube).objects


async def test_the_report_lists_managed_namespace_offloadings_and_their_events(
    kube: kubeapi.KubeApi,
) -> None:
    world(kube)
    kube.add({"apiVersion": "offloading.liqo.io/v1beta1", "kind": "NamespaceOffloading",
              "metadata": {"name": "offloading", "namespace": "other"}})  # fmt: skip
    for reason in ("CarbonRebalanced", "CarbonPriceChanged", "Scheduled"):
        kube.add({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": reason.lower(), "namespace": "shop"},
            "reason": reason, "eventTime": "2026-01-01T00:00:00.000000Z",
            "regarding": {"kind": "NamespaceOffloading", "namespace": "shop",
                          "name": "offloading"},
        }, "events")  # fmt: skip
    _, events, objects = await reads.collect(
        kube.api, "carbonshift-accounting", NAMESPACE, "", EVENT_REASONS
    )
    assert [(o["kind"], o["metadata"]["namespace"]) for o in objects] == [
        ("NamespaceOffloading", "shop")
    ]
    assert sorted(e["reason"] for e in events) == ["CarbonPriceChanged", "CarbonRebalanced"]
