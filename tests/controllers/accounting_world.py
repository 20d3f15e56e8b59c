"""The accounting's world for tests: managed policies and their ResourceBindings, a
NodePool and its Nodes as stored objects, the leader's accountant against the in-process
API server (:mod:`tests.kubeapi`), and readers of what it persisted and exported."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import pytest
from kubernetes_asyncio import client

from tests import kubeapi
from tests.support import NOW, reading
from webhook import integrations, testing
from webhook.controllers.accounting import Accountant
from webhook.decision.karmada.terms import GREEN_TERM, TIER_TERM
from webhook.decision.ledger import LEDGER_LABELS, Ledger
from webhook.decision.record import Record, fingerprint
from webhook.kinds import Context
from webhook.model.config import ClusterConfig, Config, parse
from webhook.model.vocabulary import DECISION
from webhook.runtime import metrics

NAMESPACE = "carbonshift-system"
CONFIGMAP = "carbonshift-accounting"
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
        "apiVersion": "work.karmada.io/v1alpha2",
        "kind": "ResourceBinding",
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
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": pool,
                                              "topology.kubernetes.io/zone": zone}},
        "status": {"capacity": {"cpu": cpu}},
    }  # fmt: skip


def seed(kube: kubeapi.KubeApi, *objects: dict[str, Any]) -> None:
    for obj in objects:
        kube.add(obj)


def configmap(kube: kubeapi.KubeApi) -> dict[str, Any] | None:
    """The stored ledger ConfigMap, if any."""
    held = kube.items("configmaps", NAMESPACE)
    return next((o for o in held if o["metadata"]["name"] == CONFIGMAP), None)


def saves(kube: kubeapi.KubeApi) -> list[str]:
    """The methods of the requests on the ledger ConfigMap, in order; every write by the
    field manager ``carbonshift``."""
    calls = kube.calls(resource="configmaps")
    for call in calls:
        name = call.where.name or call.body["metadata"]["name"]
        assert (call.where.namespace, name) == (NAMESPACE, CONFIGMAP)
        if call.method != "GET":
            assert call.query.get("fieldManager") == "carbonshift"
    return [call.method for call in calls]


def persisted(kube: kubeapi.KubeApi) -> Ledger:
    """The ledger in the stored ConfigMap (labelled as carbonshift's)."""
    stored = configmap(kube)
    assert stored is not None
    assert stored["metadata"]["labels"] == LEDGER_LABELS
    return Ledger.from_data(stored["data"])


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
async def kube() -> AsyncIterator[kubeapi.KubeApi]:
    async with kubeapi.serve() as server:
        yield server


def context(config: Config) -> Context:
    fleet = {n: ClusterConfig(name=n, zone=z) for n, z in ZONES.items()}
    table = {z: reading(z, v) for z, v in VALUES.items()}
    return Context(config, table, NOW, fleet=fleet)


def accountant(
    api: client.ApiClient, clock: Clock, gate: kubeapi.Gate | None = None, **settings: Any
) -> Accountant:
    config = parse({
        "accounting": settings,
        "nodepools": {"topology_zones": {"eu-north-1a": "SE-SE3", "eu-central-1a": "PL"}},
    })  # fmt: skip
    return Accountant(
        api, config, lambda: context(config), gate or kubeapi.Gate(), namespace=NAMESPACE,
        accounts=integrations.accounts(), clock=clock,
    )  # fmt: skip


def sample(metric: Any, **labels: str) -> float:
    for family in metric.collect():
        for s in family.samples:
            if s.labels == labels and not s.name.endswith("_created"):
                return float(s.value)
    return 0.0
