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
from tests.support import eventually
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
    outcomes = await carrier(kube).sync()
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
    assert await carrier(kube).sync() == {}  # nothing left to change


async def test_a_policy_no_longer_placed_in_tiers_loses_its_snapshot(
    kube: kubeapi.KubeApi,
) -> None:
    kube.add(policy(managed=False))
    ours = {"namespace": "shop", "name": "carbonshift.PropagationPolicy.web",
            "clusters": [{"name": "green"}]}  # fmt: skip
    kube.add(configmap_binding([DEPS, ours]))
    assert await carrier(kube).sync() == {"released": 1}
    assert snapshots(kube) == [DEPS]


async def test_nothing_is_written_without_the_lease(kube: kubeapi.KubeApi) -> None:
    kube.add(policy())
    kube.add(configmap_binding())
    gate = kubeapi.Gate()
    gate.lose()
    assert await carrier(kube, gate).sync() == {}
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
    assert one.keys() == [("PropagationPolicy", "shop", "web")]  # its bindings told it
    assert await one.sync() == {"carried": 1}
    clusters = next(e for e in snapshots(kube) if e["name"].startswith("carbonshift."))
    assert [c["name"] for c in clusters["clusters"]] == ["dirty", "elsewhere", "green", "mid"]


async def test_a_running_carrier_carries_again_only_the_policy_whose_binding_moved(
    kube: kubeapi.KubeApi,
) -> None:
    kube.add(policy())
    kube.add(binding("web", {"green": 4, "elsewhere": 2}))
    kube.add(configmap_binding([DEPS]))
    other = testing.propagation_policy("api", namespace="shop", uid="uid-api", placement=FILL,
                                       annotations={DECISION: "{}"})  # fmt: skip
    kube.add(other)
    kube.add(binding("api", {"green": 2}))
    idle = configmap_binding()
    idle["metadata"] |= {
        "name": "api-config-configmap",
        "uid": "rb-api-config",
        "annotations": {
            "propagationpolicy.karmada.io/name": "api",
            "propagationpolicy.karmada.io/namespace": "shop",
        },
    }
    kube.add(idle)  # fmt: skip

    def ours() -> list[str]:
        found = next((e for e in snapshots(kube) if e["name"].startswith("carbonshift.")), None)
        return [c["name"] for c in found["clusters"]] if found else []

    def put() -> list[str]:
        return [c.where.name for c in kube.calls("PUT", BINDINGS)]

    gate = kubeapi.Gate()
    events = EventRecorder(kube.api, "replica-0", gate)
    config = parse({"carry": {"interval_seconds": 3600}})  # no safety-net pass in the test
    running = Carrier(kube.api, config, gate, events=events)
    running.tick = 0.02
    running.start()
    try:
        await eventually(lambda: len(put()) == 2, "both policies' ConfigMaps carried", seen=put)
        assert ours() == ["dirty", "elsewhere", "green", "mid"]

        def moved(obj: dict[str, Any]) -> None:
            obj["spec"]["clusters"] = [{"name": "green", "replicas": 4},
                                       {"name": "far", "replicas": 2}]  # fmt: skip

        kube.touch(BINDINGS, "web-deployment", "shop", moved)  # a replica now runs on "far"
        await eventually(lambda: "far" in ours(), "the ConfigMap follows the replica",
                         seen=ours)  # fmt: skip
    finally:
        await running.stop()
    assert sorted(put()) == ["api-config-configmap", "web-config-configmap",
                             "web-config-configmap"]  # fmt: skip
