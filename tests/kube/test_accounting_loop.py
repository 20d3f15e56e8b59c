"""The leader's carbon accounting against a fake API server (policies, ResourceBindings,
Clusters, NodePools, Nodes, the ConfigMap): an interval is counted at the intensity of
where the replicas ran and against the user's own placement; the totals are persisted and
a new leader resumes from them; nothing is written without the Lease; the metrics have
one series per managed object."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio import client

from tests.support import NOW, reading
from webhook import testing
from webhook.decision.placement import GREEN_TERM, TIER_TERM
from webhook.decision.record import Record, fingerprint
from webhook.kinds import Context
from webhook.kube.accounting import Accountant, Ledger
from webhook.model.config import ClusterConfig, Config, parse
from webhook.model.vocabulary import DECISION
from webhook.runtime import metrics

ZONES = {"green": "SE-SE3", "dirty": "PL"}
VALUES = {"SE-SE3": 25.0, "PL": 800.0}
FILL = {
    "clusterAffinities": [{
        "affinityName": GREEN_TERM, "clusterNames": ["green"],
        "overflowAffinities": [{"affinityName": f"{TIER_TERM}1", "clusterNames": ["dirty"]}],
    }],
    "replicaScheduling": {"replicaSchedulingType": "Divided",
                          "replicaDivisionPreference": "Weighted",
                          "weightPreference": {"dynamicWeight": "AvailableReplicas"}},
}  # fmt: skip
USER = {"replicaScheduling": {"replicaSchedulingType": "Divided"}}
# One replica of 0.5 vCPU over 300 s at 2.12 W/vCPU.
KWH = 2.12 * 0.5 * (300 / 3600) / 1000


def policy(name: str, namespace: str = "shop") -> dict[str, Any]:
    record = Record(body={"clusters": {"green": {"zone": "SE-SE3"}, "dirty": {"zone": "PL"}}})
    for field in ("clusterAffinities", "replicaScheduling"):
        record.orig["placement." + field] = USER.get(field)
        record.own["placement." + field] = fingerprint(FILL[field])
    annotations = {DECISION: record.encode()}
    return testing.propagation_policy(
        name, namespace=namespace, annotations=annotations, placement=FILL
    )


def binding(name: str, clusters: dict[str, int], namespace: str = "shop") -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"{name}-deployment", "namespace": namespace,
            "annotations": {"propagationpolicy.karmada.io/name": name,
                            "propagationpolicy.karmada.io/namespace": namespace},
        },
        "spec": {
            "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name,
                         "namespace": namespace, "uid": f"uid-{name}"},
            "replicas": sum(clusters.values()),
            "replicaRequirements": {"resourceRequest": {"cpu": "500m"}},
            "clusters": [{"name": c, "replicas": n} for c, n in clusters.items()],
        },
    }  # fmt: skip


def nodepool(name: str) -> dict[str, Any]:
    zone = "topology.kubernetes.io/zone"
    user = [{"key": zone, "operator": "In", "values": ["eu-north-1a", "eu-central-1a"]}]
    written = [{"key": zone, "operator": "In", "values": ["eu-north-1a"]}]
    record = Record(body={"zone": "SE-SE3"}, orig={"template.requirements": user},
                    own={"template.requirements": fingerprint(written)})  # fmt: skip
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name, "annotations": {DECISION: record.encode()}},
        "spec": {"template": {"spec": {"requirements": written}}},
    }


def node(name: str, pool: str, zone: str, cpu: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": pool,
                                              "topology.kubernetes.io/zone": zone}},
        "status": {"capacity": {"cpu": cpu}},
    }  # fmt: skip


@dataclasses.dataclass
class FakeApi:
    policies: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    bindings: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    nodepools: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    nodes: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    configmap: dict[str, Any] | None = None
    writes: int = 0

    @staticmethod
    def _reply(body: object, status: int = 200) -> web.Response:
        return web.Response(status=status, body=orjson.dumps(body), content_type="application/json")

    async def list(self, request: web.Request) -> web.Response:
        items = {
            "propagationpolicies": self.policies,
            "clusterpropagationpolicies": [],
            "clusters": [],
            "resourcebindings": self.bindings,
            "clusterresourcebindings": [],
            "nodepools": self.nodepools,
        }[request.match_info["plural"]]
        return self._reply({"items": items})

    async def list_nodes(self, request: web.Request) -> web.Response:
        assert request.query.get("labelSelector") == "karpenter.sh/nodepool"
        return self._reply({"kind": "NodeList", "apiVersion": "v1", "items": self.nodes})

    async def read(self, request: web.Request) -> web.Response:
        if self.configmap is None:
            return self._reply({"kind": "Status", "code": 404, "reason": "NotFound"}, 404)
        return self._reply(self.configmap)

    async def write(self, request: web.Request) -> web.Response:
        body = await request.json()
        if request.method == "POST" and self.configmap is not None:
            return self._reply({"kind": "Status", "code": 409, "reason": "AlreadyExists"}, 409)
        self.writes += 1
        body["metadata"]["resourceVersion"] = str(self.writes)
        self.configmap = body
        return self._reply(body, 201 if request.method == "POST" else 200)


class Gate:
    leading = True


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture(autouse=True)
def no_series() -> None:
    """Every test starts with no accounting series (the registry is global)."""
    for metric in (
        metrics.ENERGY_KWH,
        metrics.EMISSIONS_GRAMS,
        metrics.COUNTERFACTUAL_GRAMS,
        metrics.AVOIDED_GRAMS,
    ):
        metric.clear()


@pytest.fixture
async def fake() -> AsyncIterator[tuple[FakeApi, client.ApiClient]]:
    api_state = FakeApi()
    app = web.Application()
    app.router.add_get("/apis/{group}/{version}/{plural}", api_state.list)
    app.router.add_get("/api/v1/nodes", api_state.list_nodes)
    app.router.add_get("/api/v1/namespaces/{ns}/configmaps/{name}", api_state.read)
    app.router.add_post("/api/v1/namespaces/{ns}/configmaps", api_state.write)
    app.router.add_put("/api/v1/namespaces/{ns}/configmaps/{name}", api_state.write)
    async with TestServer(app) as http:
        api = client.ApiClient(client.Configuration(host=f"http://{http.host}:{http.port}"))
        try:
            yield api_state, api
        finally:
            await api.close()


def context(config: Config) -> Context:
    fleet = {n: ClusterConfig(name=n, zone=z) for n, z in ZONES.items()}
    table = {z: reading(z, v) for z, v in VALUES.items()}
    return Context(config, table, NOW, fleet=fleet)


def accountant(
    api: client.ApiClient, clock: Clock, gate: Gate | None = None, **settings: Any
) -> Accountant:
    config = parse({
        "accounting": settings,
        "nodepools": {"topology_zones": {"eu-north-1a": "SE-SE3", "eu-central-1a": "PL"}},
    })  # fmt: skip
    return Accountant(
        api, config, lambda: context(config), gate or Gate(), namespace="carbonshift-system",
        clock=clock,
    )  # fmt: skip


def sample(metric: Any, **labels: str) -> float:
    for family in metric.collect():
        for s in family.samples:
            if s.labels == labels and not s.name.endswith("_created"):
                return float(s.value)
    return 0.0


LABELS = {"kind": "PropagationPolicy", "namespace": "shop", "name": "web",
          "signal": "average", "method": "coefficient"}  # fmt: skip


async def test_an_interval_is_counted_against_the_users_own_division(
    fake: tuple[FakeApi, client.ApiClient],
) -> None:
    state, api = fake
    state.policies = [policy("web")]
    state.bindings = [binding("web", {"green": 4})]
    clock = Clock()
    leader = accountant(api, clock)
    leader.forget()
    assert await leader.pass_once() == 0  # the first pass only sets the start
    assert state.configmap is not None
    clock.now += timedelta(seconds=300)
    assert await leader.pass_once() == 1
    ledger = Ledger.from_data(state.configmap["data"])
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


async def test_a_new_leader_resumes_from_the_persisted_totals(
    fake: tuple[FakeApi, client.ApiClient],
) -> None:
    state, api = fake
    state.policies = [policy("web")]
    state.bindings = [binding("web", {"green": 4})]
    clock = Clock()
    first = accountant(api, clock)
    first.forget()
    await first.pass_once()
    clock.now += timedelta(seconds=300)
    await first.pass_once()
    first.forget()  # it stops leading: its series go
    assert sample(metrics.EMISSIONS_GRAMS, **LABELS) == 0
    # Another replica takes over one interval later and counts that interval too.
    clock.now += timedelta(seconds=300)
    second = accountant(api, clock)
    assert await second.pass_once() == 1
    assert state.configmap is not None
    totals = Ledger.from_data(state.configmap["data"]).objects["PropagationPolicy/shop/web"]
    assert totals.totals["average/coefficient"].grams == pytest.approx(2 * 4 * KWH * 25)
    assert sample(metrics.EMISSIONS_GRAMS, **LABELS) == pytest.approx(2 * 4 * KWH * 25)
    # After a long gap (no leader for an hour) the gap is not counted.
    clock.now += timedelta(hours=1)
    third = accountant(api, clock)
    assert await third.pass_once() == 0
    again = Ledger.from_data(state.configmap["data"]).objects["PropagationPolicy/shop/web"]
    assert again.totals["average/coefficient"].grams == pytest.approx(2 * 4 * KWH * 25)
    third.forget()


async def test_nodepools_count_their_nodes_cpu_by_zone(
    fake: tuple[FakeApi, client.ApiClient],
) -> None:
    state, api = fake
    state.nodepools = [nodepool("batch")]
    state.nodes = [
        node("n1", "batch", "eu-north-1a", "4"),
        node("n2", "batch", "eu-north-1a", "4"),
        node("n3", "other", "eu-central-1a", "64"),  # another pool: not ours
    ]
    clock = Clock()
    leader = accountant(api, clock)
    await leader.pass_once()
    clock.now += timedelta(hours=0.05)
    assert await leader.pass_once() == 1
    assert state.configmap is not None
    ledger = Ledger.from_data(state.configmap["data"])
    totals = ledger.objects["NodePool//batch"].totals["average/coefficient"]
    kwh = 8 * 2.12 * 0.05 / 1000  # 8 vCPU for 3 minutes
    assert totals.kwh == pytest.approx(kwh)
    assert totals.grams == pytest.approx(kwh * 25)
    # The user's requirements allowed both zones: the same vCPUs spread evenly.
    assert totals.counterfactual_grams == pytest.approx(kwh / 2 * 25 + kwh / 2 * 800)
    leader.forget()


async def test_nothing_is_written_without_the_lease(
    fake: tuple[FakeApi, client.ApiClient],
) -> None:
    state, api = fake
    state.policies = [policy("web")]
    state.bindings = [binding("web", {"green": 4})]
    gate = Gate()
    gate.leading = False
    leader = accountant(api, Clock(), gate)
    assert await leader.pass_once() == 0
    assert state.configmap is None
    assert state.writes == 0


async def test_embodied_emissions_when_configured(
    fake: tuple[FakeApi, client.ApiClient],
) -> None:
    state, api = fake
    state.policies = [policy("web")]
    state.bindings = [binding("web", {"green": 4})]
    clock = Clock()
    leader = accountant(api, clock, embodied_g_per_vcpu_hour=0.479)
    leader.forget()
    await leader.pass_once()
    clock.now += timedelta(seconds=300)
    await leader.pass_once()
    assert state.configmap is not None
    totals = Ledger.from_data(state.configmap["data"]).objects["PropagationPolicy/shop/web"]
    got = totals.totals["average/coefficient"]
    embodied = 4 * 0.5 * (300 / 3600) * 0.479
    assert got.embodied_grams == pytest.approx(embodied)
    assert got.grams == pytest.approx(4 * KWH * 25 + embodied)
    assert got.avoided_grams == pytest.approx(2 * KWH * 775)
    leader.forget()


async def test_series_are_bounded_by_the_managed_objects(
    fake: tuple[FakeApi, client.ApiClient],
) -> None:
    """1,000 managed policies of 5 replicas each: one series per object per metric."""
    state, api = fake
    state.policies = [policy(f"app-{k}") for k in range(1000)]
    state.bindings = [binding(f"app-{k}", {"green": 3, "dirty": 2}) for k in range(1000)]
    clock = Clock()
    leader = accountant(api, clock)
    leader.forget()
    await leader.pass_once()
    clock.now += timedelta(seconds=300)
    assert await leader.pass_once() == 1000
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
    assert state.configmap is not None
    size = sum(len(v) for v in state.configmap["data"].values())
    assert size < 1_000_000, size  # fits a ConfigMap
    leader.forget()
