"""The leader's carbon accounting against the in-process API server (:mod:`tests.kubeapi`:
policies, ResourceBindings, NodePools, Nodes, the ConfigMap): an interval is counted at
the intensity of where the replicas ran and against the user's own placement; the totals
are persisted in a ConfigMap, written over another writer's version, and a new leader
resumes from them; nothing is written without the Lease; the metrics have one series per
managed object."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests import kubeapi
from tests.controllers.accounting_world import (
    CONFIGMAP,
    KWH,
    NAMESPACE,
    Clock,
    accountant,
    binding,
    configmap,
    kube,
    no_series,
    node,
    nodepool,
    persisted,
    policy,
    sample,
    saves,
    seed,
)
from tests.support import eventually
from webhook.runtime import metrics

__all__ = ["kube", "no_series"]  # fixtures used by name

LABELS = {"kind": "PropagationPolicy", "namespace": "shop", "name": "web",
          "signal": "average", "method": "coefficient"}  # fmt: skip


async def test_an_interval_is_counted_against_the_users_own_division(
    kube: kubeapi.KubeApi,
) -> None:
    seed(kube, policy("web"), binding("web", {"green": 4}))
    clock = Clock()
    leader = accountant(kube.api, clock)
    leader.forget()
    assert await leader.account() == 0  # the first pass only sets the start
    assert configmap(kube) is not None
    clock.now += timedelta(seconds=300)
    assert await leader.account() == 1
    ledger = persisted(kube)
    totals = ledger.objects["PropagationPolicy/shop/web"].totals["average/coefficient"]
    # Actual: 4 replicas on green (25 g/kWh). Counterfactual: the user's plain Divided
    # policy splits them evenly: 2 on green, 2 on dirty (800 g/kWh).
    assert totals.kwh == pytest.approx(4 * KWH)
    assert totals.grams == pytest.approx(4 * KWH * 25)
    assert totals.counterfactual_grams == pytest.approx(2 * KWH * 25 + 2 * KWH * 800)
    assert totals.avoided_grams == pytest.approx(2 * KWH * 775)
    assert totals.provider == "test"  # the readings' source
    places = ledger.objects["PropagationPolicy/shop/web"].places
    assert places["green"]["rh"] == pytest.approx(4 * 300 / 3600)
    assert places["dirty"]["cf_g"] == pytest.approx(2 * KWH * 800)
    assert ledger.series[-1]["r"] == {"green": 4}
    assert ledger.series[-1]["i"] == {"green": 25.0, "dirty": 800.0}
    assert sample(metrics.EMISSIONS_GRAMS, **LABELS) == pytest.approx(4 * KWH * 25)
    assert sample(metrics.AVOIDED_GRAMS, **LABELS) == pytest.approx(2 * KWH * 775)
    # Read (none yet), created, then replaced at the version the leader wrote.
    assert saves(kube) == ["GET", "POST", "PUT"]


async def test_a_write_meeting_another_version_is_written_over(kube: kubeapi.KubeApi) -> None:
    seed(kube, policy("web"), binding("web", {"green": 4}))
    clock = Clock()
    leader = accountant(kube.api, clock)
    leader.forget()
    await leader.account()
    # A former leader's last write lands after this leader's: the replace meets a newer
    # version (409), the leader reads the version and writes its own ledger over it.
    kube.touch("configmaps", CONFIGMAP, NAMESPACE, lambda o: o["data"].update(stale="{}"))
    clock.now += timedelta(seconds=300)
    assert await leader.account() == 1
    assert saves(kube) == ["GET", "POST", "PUT", "GET", "PUT"]
    stored = configmap(kube)
    assert stored is not None
    assert "stale" not in stored["data"]
    totals = persisted(kube).objects["PropagationPolicy/shop/web"].totals
    assert totals["average/coefficient"].grams == pytest.approx(4 * KWH * 25)
    # Deleted meanwhile: the replace meets 404 and the ledger is created again.
    kube.remove("configmaps", CONFIGMAP, NAMESPACE)
    clock.now += timedelta(seconds=300)
    assert await leader.account() == 1
    assert saves(kube)[5:] == ["PUT", "GET", "POST"]
    totals = persisted(kube).objects["PropagationPolicy/shop/web"].totals
    assert totals["average/coefficient"].grams == pytest.approx(2 * 4 * KWH * 25)
    leader.forget()


async def test_a_new_leader_resumes_from_the_persisted_totals(
    kube: kubeapi.KubeApi,
) -> None:
    seed(kube, policy("web"), binding("web", {"green": 4}))
    clock = Clock()
    first = accountant(kube.api, clock)
    first.forget()
    await first.account()
    clock.now += timedelta(seconds=300)
    await first.account()
    first.forget()  # it stops leading: its series go
    assert sample(metrics.EMISSIONS_GRAMS, **LABELS) == 0
    # Another replica takes over one interval later and counts that interval too.
    clock.now += timedelta(seconds=300)
    second = accountant(kube.api, clock)
    assert await second.account() == 1
    totals = persisted(kube).objects["PropagationPolicy/shop/web"]
    assert totals.totals["average/coefficient"].grams == pytest.approx(2 * 4 * KWH * 25)
    assert sample(metrics.EMISSIONS_GRAMS, **LABELS) == pytest.approx(2 * 4 * KWH * 25)
    # After a long gap (no leader for an hour) the gap is not counted.
    clock.now += timedelta(hours=1)
    third = accountant(kube.api, clock)
    assert await third.account() == 0
    again = persisted(kube).objects["PropagationPolicy/shop/web"]
    assert again.totals["average/coefficient"].grams == pytest.approx(2 * 4 * KWH * 25)
    # Each leader read the ledger and replaced it at the version it read.
    assert saves(kube) == ["GET", "POST", "PUT", "GET", "PUT", "GET", "PUT"]
    third.forget()


async def test_nodepools_count_their_nodes_cpu_by_zone(
    kube: kubeapi.KubeApi,
) -> None:
    seed(
        kube,
        nodepool("batch"),
        node("n1", "batch", "eu-north-1a", "4"),
        node("n2", "batch", "eu-north-1a", "4"),
        node("n3", "other", "eu-central-1a", "64"),  # another pool: not ours
    )
    clock = Clock()
    leader = accountant(kube.api, clock)
    await leader.account()
    clock.now += timedelta(hours=0.05)
    assert await leader.account() == 1
    assert {r.query.get("labelSelector") for r in kube.calls("GET", "nodes")} == {
        "karpenter.sh/nodepool"
    }
    ledger = persisted(kube)
    totals = ledger.objects["NodePool//batch"].totals["average/coefficient"]
    kwh = 8 * 2.12 * 0.05 / 1000  # 8 vCPU for 3 minutes
    assert totals.kwh == pytest.approx(kwh)
    assert totals.grams == pytest.approx(kwh * 25)
    # The user's requirements allowed both zones: the same vCPUs spread evenly.
    assert totals.counterfactual_grams == pytest.approx(kwh / 2 * 25 + kwh / 2 * 800)
    leader.forget()


async def test_nothing_is_written_without_the_lease(
    kube: kubeapi.KubeApi,
) -> None:
    seed(kube, policy("web"), binding("web", {"green": 4}))
    leader = accountant(kube.api, Clock(), kubeapi.Gate(leading=False))
    assert await leader.account() == 0
    assert configmap(kube) is None
    assert kube.writes() == []


async def test_embodied_emissions_when_configured(
    kube: kubeapi.KubeApi,
) -> None:
    seed(kube, policy("web"), binding("web", {"green": 4}))
    clock = Clock()
    leader = accountant(kube.api, clock, embodied_g_per_vcpu_hour=0.479)
    leader.forget()
    await leader.account()
    clock.now += timedelta(seconds=300)
    await leader.account()
    totals = persisted(kube).objects["PropagationPolicy/shop/web"]
    got = totals.totals["average/coefficient"]
    embodied = 4 * 0.5 * (300 / 3600) * 0.479
    assert got.embodied_grams == pytest.approx(embodied)
    assert got.grams == pytest.approx(4 * KWH * 25 + embodied)
    assert got.avoided_grams == pytest.approx(2 * KWH * 775)
    leader.forget()


async def test_series_are_bounded_by_the_managed_objects(
    kube: kubeapi.KubeApi,
) -> None:
    """1,000 managed policies of 5 replicas each: one series per object per metric."""
    for k in range(1000):
        seed(kube, policy(f"app-{k}"), binding(f"app-{k}", {"green": 3, "dirty": 2}))
    clock = Clock()
    leader = accountant(kube.api, clock)
    leader.forget()
    await leader.account()
    clock.now += timedelta(seconds=300)
    assert await leader.account() == 1000
    for metric in (
        metrics.ENERGY_KWH,
        metrics.EMISSIONS_GRAMS,
        metrics.COUNTERFACTUAL_GRAMS,
        metrics.AVOIDED_GRAMS,
    ):
        [family] = metric.collect()
        series = [s for s in family.samples if not s.name.endswith("_created")]
        assert len(series) == 1000, family.name
        assert {tuple(sorted(s.labels)) for s in series} == {
            ("kind", "method", "name", "namespace", "signal")
        }
    stored = configmap(kube)
    assert stored is not None
    size = sum(len(v) for v in stored["data"].values())
    assert size < 1_000_000, size  # fits a ConfigMap
    leader.forget()


async def test_a_running_accountant_passes_at_once_and_retries_a_failed_pass(
    kube: kubeapi.KubeApi,
) -> None:
    """Started, a term's first pass runs at once; the next is due only after the interval
    (an hour here), but a pass that raised is counted as an error and retried with the
    key's back-off (half a second), not an interval later."""
    seed(kube, policy("web"), binding("web", {"green": 4}))
    leader = accountant(kube.api, Clock(), interval_seconds=3600)
    leader.tick = 0.01
    passes: list[str] = []
    account = leader.account

    async def failing_once() -> int:
        passes.append("failed" if len(passes) == 1 else "ran")
        if passes[-1] == "failed":
            raise RuntimeError("the API server went away")
        return await account()

    leader.account = failing_once  # type: ignore[method-assign]
    errors = sample(metrics.ACCOUNTED, outcome="error")
    leader.start()
    try:
        first = lambda: configmap(kube) is not None  # noqa: E731
        await eventually(first, "the first pass", seen=lambda: passes)
        assert passes == ["ran"]
        leader.queue.add("ledger")  # as if the interval were over: this pass fails
        await eventually(lambda: len(passes) >= 3, "the retry", seen=lambda: passes)
        assert passes[:3] == ["ran", "failed", "ran"]
        assert sample(metrics.ACCOUNTED, outcome="error") == errors + 1
        # The retry succeeded: the key's back-off starts afresh.
        await eventually(lambda: leader.queue.failures("ledger") == 0, "the back-off reset")
    finally:
        await leader.stop()
        leader.forget()
