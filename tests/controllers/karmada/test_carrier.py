"""The leader's carrier against the in-process API server (:mod:`tests.kubeapi`): a managed
policy's non-workload bindings get carbonshift's ``requiredBy`` snapshot (every tier's
clusters and where a replica runs), others' snapshots stay, a policy no longer placed in
tiers loses it, and nothing is written without the Lease."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests import kubeapi
from tests.controllers.karmada.test_rebalancer import FILL, binding
from webhook import testing
from webhook.controllers.karmada.carrier import Carrier
from webhook.controllers.karmada.rebalancer import Rebalancer, Watched
from webhook.kube.events import EventRecorder
from webhook.model.config import parse
from webhook.model.vocabulary import DECISION

BINDINGS = "resourcebindings"
DEPS = {"namespace": "shop", "name": "web-deployment", "clusters": [{"name": "green"}]}
"""What the dependencies distributor keeps on the ConfigMap's binding."""


def configmap_binding(required_by: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    obj = binding("web", {})
    obj["metadata"] |= {"name": "web-config-configmap", "uid": "rb-config"}
    obj["spec"] = {"resource": {"apiVersion": "v1", "kind": "ConfigMap", "name": "web-config",
                                "namespace": "shop"}}  # fmt: skip
    if required_by is not None:
        obj["spec"]["requiredBy"] = required_by
    return obj


def policy(*, managed: bool = True) -> dict[str, Any]:
    return testing.propagation_policy(
        "web", namespace="shop", uid="uid-web", placement=FILL,
        annotations={DECISION: "{}"} if managed else None,
    )  # fmt: skip


@pytest.fixture
async def kube() -> AsyncIterator[kubeapi.KubeApi]:
    async with kubeapi.serve() as server:
        yield server


def carrier(kube: kubeapi.KubeApi, gate: kubeapi.Gate | None = None) -> Carrier:
    gate = gate or kubeapi.Gate()
    return Carrier(kube.api, parse({}), gate, events=EventRecorder(kube.api, "replica-0", gate))


def snapshots(kube: kubeapi.KubeApi) -> list[dict[str, Any]]:
    stored = kube.get(BINDINGS, "web-config-configmap", "shop")
    found: list[dict[str, Any]] = stored["spec"].get("requiredBy") or []
    return found


async def test_a_non_workload_binding_follows_every_tier_and_keeps_others_snapshots(
    kube: kubeapi.KubeApi,
) -> None:
    kube.add(policy())
    kube.add(binding("web", {"green": 4, "elsewhere": 2}))
    kube.add(configmap_binding([DEPS]))
    outcomes = await carrier(kube).reconcile()
    assert outcomes == {"carried": 1}
    assert snapshots(kube) == [
        DEPS,
        {"namespace": "shop", "name": "carbonshift.PropagationPolicy.web",
         "clusters": [{"name": n} for n in ("dirty", "elsewhere", "green", "mid")]},
    ]  # fmt: skip
    [event] = [
        e for e in kube.items("events.events.k8s.io") if e["reason"] == "CarbonResourcesCarried"
    ]
    assert event["regarding"]["name"] == "web"
    assert await carrier(kube).reconcile() == {}  # nothing left to change


async def test_a_policy_no_longer_placed_in_tiers_loses_its_snapshot(
    kube: kubeapi.KubeApi,
) -> None:
    kube.add(policy(managed=False))
    ours = {"namespace": "shop", "name": "carbonshift.PropagationPolicy.web",
            "clusters": [{"name": "green"}]}  # fmt: skip
    kube.add(configmap_binding([DEPS, ours]))
    assert await carrier(kube).reconcile() == {"released": 1}
    assert snapshots(kube) == [DEPS]


async def test_nothing_is_written_without_the_lease(kube: kubeapi.KubeApi) -> None:
    kube.add(policy())
    kube.add(configmap_binding())
    gate = kubeapi.Gate()
    gate.lose()
    with pytest.raises(Exception, match="not leading"):
        await carrier(kube, gate).reconcile()
    assert kube.calls("PUT") == []


async def test_the_carrier_reads_the_bindings_the_rebalancer_watches_and_is_told_of_them(
    kube: kubeapi.KubeApi,
) -> None:
    kube.add(policy())
    kube.add(binding("web", {"green": 4, "elsewhere": 2}))
    kube.add(configmap_binding([DEPS]))
    shared = Watched()
    gate = kubeapi.Gate()
    mover = Rebalancer(kube.api, parse({}), gate, watched=shared)
    assert mover.watched is shared
    one = Carrier(kube.api, parse({}), gate, watched=shared)
    assert one.bindings is shared.bindings  # one cache per binding kind, not two
    for cache in shared.caches:
        await cache.list_once(kube.api)
    assert one.changes > 0  # the shared bindings' list told the carrier
    assert await one.reconcile() == {"carried": 1}
    clusters = next(e for e in snapshots(kube) if e["name"].startswith("carbonshift."))
    assert [c["name"] for c in clusters["clusters"]] == ["dirty", "elsewhere", "green", "mid"]
