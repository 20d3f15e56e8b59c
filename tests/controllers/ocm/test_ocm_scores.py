"""The leader's AddOnPlacementScores against the in-process API server
(:mod:`tests.kubeapi`: ManagedClusters, their namespaces, AddOnPlacementScores with a
status subresource, watches): one ``carbon`` object per ManagedCluster namespace with both
scores and ``validUntil``, created by server-side apply of the object, then of its status;
rewritten only past the hysteresis margin; nothing written without the Lease, for a
cluster without a zone, or where OCM is not installed. Run as a keyed controller, a feed
refresh re-decides only the clusters of the zones it changed, and a new ManagedCluster is
scored without one."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from kubernetes_asyncio import client

from tests import kubeapi
from tests.support import NOW, eventually, reading
from webhook.controllers.ocm.scores import PlacementScorer
from webhook.decision import ocm
from webhook.kinds.reevaluation import OutlookMethod
from webhook.model.config import parse
from webhook.model.intensity import IntensityTable
from webhook.model.vocabulary import ZONE

GROUP, SCORES = ocm.SCORES.group, ocm.SCORES.plural


def managed(name: str, zone: str | None) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "ManagedCluster",
        "metadata": {"name": name, "labels": {ZONE: zone} if zone else {}},
    }


def namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def fleet(kube: kubeapi.KubeApi, clusters: list[dict[str, Any]], *namespaces: str) -> None:
    """The ManagedClusters, and the namespaces OCM's registration made for them."""
    for obj in [*clusters, *map(namespace, namespaces)]:
        kube.add(obj)


def scores(kube: kubeapi.KubeApi) -> dict[str, dict[str, Any]]:
    """namespace -> the stored AddOnPlacementScore ``carbon``."""
    held = kube.items(SCORES)
    return {o["metadata"]["namespace"]: o for o in held if o["metadata"]["name"] == ocm.RESOURCE}


def writes(kube: kubeapi.KubeApi) -> list[tuple[str, str]]:
    """(namespace, ``object`` or ``status``) of each write, in order; each a forced
    server-side apply of ``carbon`` by the field manager ``carbonshift``."""
    done = kube.writes()
    for call in done:
        assert (call.method, call.content_type) == ("PATCH", "application/apply-patch+yaml")
        assert call.query.get("fieldManager") == "carbonshift"
        assert call.query.get("force", "").lower() == "true"
        assert (call.where.resource, call.where.name) == (SCORES, ocm.RESOURCE)
    return [(call.where.namespace, call.where.subresource or "object") for call in done]


@dataclasses.dataclass
class Feed:
    values: dict[str, float]
    ahead: dict[str, float] = dataclasses.field(default_factory=dict)
    wanted: set[str] = dataclasses.field(default_factory=set)

    @dataclasses.dataclass
    class _Snapshot:
        table: IntensityTable
        generation: int = 0

    def snapshot(self) -> Feed._Snapshot:
        table = {z: reading(z, v) for z, v in self.values.items()}
        return self._Snapshot(table, hash(frozenset(self.values.items())))

    def want(self, zone: str) -> None:
        self.wanted.add(zone)

    def outlook(self, zone: str, horizon: int, method: OutlookMethod) -> list[float] | None:
        value = self.ahead.get(zone)
        return None if value is None else [value] * (horizon + 1)


@pytest.fixture
async def kube() -> AsyncIterator[kubeapi.KubeApi]:
    """An API server with OCM's CRDs: AddOnPlacementScore's status is its subresource's,
    and a score is created only in an existing namespace."""
    async with kubeapi.serve() as server:
        server.status_subresource = {SCORES}
        server.strict_namespaces = True
        yield server


def scorer(api: client.ApiClient, feed: Feed, gate: kubeapi.Gate | None = None) -> PlacementScorer:
    config = parse({"hysteresis": {"margin": 0.1}, "ocm": {"interval_seconds": 30}})
    return PlacementScorer(api, config, feed, gate or kubeapi.Gate(), clock=lambda: NOW)


@contextlib.asynccontextmanager
async def caches(leader: PlacementScorer) -> AsyncIterator[PlacementScorer]:
    """The scorer's watched caches following the API server, synced."""
    for cache in leader.caches:
        cache.start(leader.api)
    try:
        await eventually(lambda: all(c.synced for c in leader.caches), "the caches synced")
        yield leader
    finally:
        for cache in leader.caches:
            await cache.stop()


async def decide(leader: PlacementScorer) -> dict[str, float | None]:
    """Reconcile every ManagedCluster once (as a term's first sync does); each one's
    requeue."""
    return {key: await leader.reconcile(key) for key in sorted(leader.keys())}


async def settled(kube: kubeapi.KubeApi, leader: PlacementScorer) -> None:
    """Until the score cache holds every stored ``carbon`` score as stored."""

    def same() -> bool:
        held = {k.partition("/")[0]: v[1] for k, v in leader.published.items().items()}
        return held == {ns: ocm.published(o) for ns, o in scores(kube).items()}

    await eventually(
        same, "the score cache up to date", seen=lambda: dict(leader.published.items())
    )


async def test_each_managed_cluster_gets_its_scores(kube: kubeapi.KubeApi) -> None:
    clusters = [managed("green", "SE-SE3"), managed("dirty", "PL"), managed("nowhere", None)]
    fleet(kube, clusters, "green", "dirty", "nowhere")
    feed = Feed({"SE-SE3": 25.0, "PL": 800.0}, ahead={"PL": 500.0})
    async with caches(scorer(kube.api, feed)) as leader:
        again = await decide(leader)
    assert again == {"dirty": 30.0, "green": 30.0, "nowhere": 30.0}  # the resync, at most
    assert feed.wanted == {"SE-SE3", "PL"}
    held = scores(kube)
    assert set(held) == {"green", "dirty"}
    green, dirty = held["green"]["status"], held["dirty"]["status"]
    assert green["scores"] == [
        {"name": "forecast", "value": 95},
        {"name": "intensity", "value": 95},
    ]
    assert dirty["scores"] == [
        {"name": "forecast", "value": 0},
        {"name": "intensity", "value": -60},
    ]
    assert green["validUntil"] == "2026-01-01T15:00:00Z"  # the hour's end + feed.max_age_seconds
    assert held["green"]["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "carbonshift"}
    # The object is created first: its status subresource cannot create it.
    assert writes(kube) == [
        ("dirty", "object"), ("dirty", "status"), ("green", "object"), ("green", "status"),
    ]  # fmt: skip
    read = kube.calls("GET", SCORES)
    assert read
    assert {call.query.get("fieldSelector") for call in read} == {f"metadata.name={ocm.RESOURCE}"}


async def test_rewritten_only_beyond_the_margin(kube: kubeapi.KubeApi) -> None:
    fleet(kube, [managed("green", "SE-SE3")], "green")
    # Another add-on's score in the same namespace is none of the leader's business.
    other = ocm.score_object("green")
    other["metadata"] = {"name": "resource-usage-score", "namespace": "green"}
    other["status"] = {"scores": [{"name": "cpuAvailable", "value": 50}]}
    untouched = kube.add(other)
    feed = Feed({"SE-SE3": 200.0})
    async with caches(scorer(kube.api, feed)) as leader:
        assert leader.published.items() == {}
        await decide(leader)
        assert len(writes(kube)) == 2
        await settled(kube, leader)
        feed.values["SE-SE3"] = 210.0  # +5 %: inside the margin
        await decide(leader)
        assert len(writes(kube)) == 2
        assert scores(kube)["green"]["status"]["scores"][1] == {"name": "intensity", "value": 60}
        feed.values["SE-SE3"] = 600.0
        await decide(leader)
    assert scores(kube)["green"]["status"]["scores"][1] == {"name": "intensity", "value": -20}
    assert kube.get(SCORES, "resource-usage-score", "green") == untouched
    assert len(writes(kube)) == 4


async def test_nothing_is_written_without_the_lease(kube: kubeapi.KubeApi) -> None:
    fleet(kube, [managed("green", "SE-SE3")], "green")
    gate = kubeapi.Gate(leading=False)
    async with caches(scorer(kube.api, Feed({"SE-SE3": 25.0}), gate)) as leader:
        await decide(leader)
    assert writes(kube) == []


async def test_a_missing_namespace_or_ocm_is_no_failure(kube: kubeapi.KubeApi) -> None:
    fleet(kube, [managed("green", "SE-SE3")])
    feed = Feed({"SE-SE3": 25.0})
    async with caches(scorer(kube.api, feed)) as leader:
        assert await decide(leader) == {"green": 30.0}  # no namespace "green": again later
    assert writes(kube) == [("green", "object")]  # refused: 404
    kube.unserved = {GROUP}
    async with caches(scorer(kube.api, feed)) as leader:
        assert await decide(leader) == {}
        assert not any(c.served for c in leader.caches)  # type: ignore[attr-defined]
    assert len(kube.writes()) == 1
    assert scores(kube) == {}


async def test_valid_until_is_renewed_before_it_lapses(kube: kubeapi.KubeApi) -> None:
    fleet(kube, [managed("green", "SE-SE3")], "green")
    feed = Feed({"SE-SE3": 25.0})
    now = [NOW]
    config = parse({"ocm": {"interval_seconds": 30}})
    leader = PlacementScorer(kube.api, config, feed, kubeapi.Gate(), clock=lambda: now[0])
    async with caches(leader):
        await decide(leader)
        assert len(writes(kube)) == 2
        await settled(kube, leader)
        now[0] += timedelta(hours=2, minutes=59)  # a minute before validUntil, same data
        assert await decide(leader) == {"green": 1.0}  # renewal is due: look again soon
        assert len(writes(kube)) == 2
        later = reading("SE-SE3", 25.0, valid_from=NOW + timedelta(hours=2),
                        valid_to=NOW + timedelta(hours=3))  # fmt: skip
        feed.snapshot = lambda: Feed._Snapshot({"SE-SE3": later}, 1)  # type: ignore[method-assign]
        await decide(leader)
    assert len(writes(kube)) == 4
    assert scores(kube)["green"]["status"]["validUntil"] == "2026-01-01T17:00:00Z"


async def test_as_a_controller_a_refresh_redecides_only_the_zones_it_changed(
    kube: kubeapi.KubeApi,
) -> None:
    fleet(kube, [managed("green", "SE-SE3"), managed("dirty", "PL")], "green", "dirty", "new")
    feed = Feed({"SE-SE3": 25.0, "PL": 800.0})
    leader = scorer(kube.api, feed)
    leader.tick = 0.01
    leader.start()
    try:
        await eventually(lambda: len(scores(kube)) == 2, "both clusters scored",
                         seen=lambda: writes(kube))  # fmt: skip
        await settled(kube, leader)
        feed.values["PL"] = 100.0  # only PL's clusters are decided again
        await eventually(
            lambda: len(writes(kube)) == 6, "dirty rescored", seen=lambda: writes(kube)
        )
        assert writes(kube)[4:] == [("dirty", "object"), ("dirty", "status")]
        kube.add(managed("new", "FR"))  # a new cluster: the watch queues it, no refresh needed
        feed.values["FR"] = 50.0  # (the feed holds FR once asked)
        await eventually(lambda: "new" in scores(kube), "the new cluster scored",
                         seen=lambda: writes(kube))  # fmt: skip
        assert [w for w in writes(kube)[6:] if w[0] != "new"] == []
    finally:
        await leader.stop()
