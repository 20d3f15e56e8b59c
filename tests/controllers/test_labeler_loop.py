"""The leader's Cluster intensity labels against an in-process API server
(:mod:`tests.kubeapi`), through the real Kubernetes client: every Karmada Cluster gets
``carbonshift.io/intensity`` and its annotations by server-side apply as field manager
``carbonshift``, other keys untouched; a class change records an ``IntensityClassChanged``
Event; a cluster hovering at a threshold keeps its class (band hysteresis); stale data and
a replica without the Lease write nothing; Liqo's virtual nodes get the same through the
core API."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Mapping
from typing import Any, cast

import pytest

from tests import kubeapi
from tests.support import NOW, Clock, eventually, reading
from webhook import testing
from webhook.controllers.labels import NODES, ClusterLabeler
from webhook.decision.karmada.bindings import CLUSTERS as CLUSTER_RESOURCE
from webhook.feed import IntensityFeed
from webhook.kube.events import EventRecorder
from webhook.model import vocabulary
from webhook.model.config import parse
from webhook.model.intensity import IntensityTable
from webhook.model.resources import Resource
from webhook.runtime import metrics

CLUSTERS = "clusters.cluster.karmada.io"
ZONES = {"member-fr": "FR", "member-de": "DE", "member-pl": "PL"}
OURS = {vocabulary.INTENSITY_CLASS}
ANNOTATIONS = {
    vocabulary.INTENSITY_VALUE,
    vocabulary.INTENSITY_ZONE,
    vocabulary.INTENSITY_SOURCE,
    vocabulary.INTENSITY_TIME,
    vocabulary.INTENSITY_SINCE,
}


@dataclasses.dataclass(frozen=True)
class Place:
    labels: Mapping[str, str]
    grid_zone: str | None


@dataclasses.dataclass
class Inventory:
    """The fleet inventory as its watch would see the API server's Clusters."""

    kube: kubeapi.KubeApi
    resource: str = CLUSTERS
    synced: bool = True

    def clusters(self) -> Mapping[str, Place]:
        return {
            c["metadata"]["name"]: Place(
                c["metadata"].get("labels") or {},
                (c["metadata"].get("labels") or {}).get(vocabulary.ZONE),
            )
            for c in self.kube.items(self.resource)
        }


@dataclasses.dataclass
class Snapshot:
    table: IntensityTable
    generation: int


@dataclasses.dataclass
class Feed:
    """What the intensity feed holds: ``values`` per zone, stale when told."""

    values: dict[str, float]
    stale: bool = False
    wanted: set[str] = dataclasses.field(default_factory=set)

    def snapshot(self) -> Snapshot:
        table = {z: reading(z, v, stale=self.stale) for z, v in self.values.items()}
        return Snapshot(table, hash((tuple(self.values.items()), self.stale)))

    def want(self, zone: str) -> None:
        self.wanted.add(zone)


@pytest.fixture
async def kube() -> AsyncIterator[kubeapi.KubeApi]:
    async with kubeapi.serve() as server:
        for name, zone in ZONES.items():
            server.add(testing.cluster(name, zone=zone, labels={"team": "infra"}))
        yield server


def labeler(
    kube: kubeapi.KubeApi,
    feed: Feed,
    clock: Clock,
    gate: kubeapi.Gate | None = None,
    resource: Resource = CLUSTER_RESOURCE,
) -> ClusterLabeler:
    config = parse({"labels": {"low_below": 150, "high_from": 400, "band": 0.1,
                               "min_interval_seconds": 1800}})  # fmt: skip
    gate = gate or kubeapi.Gate()
    events = EventRecorder(kube.api, "replica-0", gate)
    return ClusterLabeler(
        kube.api, config, Inventory(kube, resource.plural),
        cast(IntensityFeed, feed), gate, events=events, clock=clock, resource=resource,
    )  # fmt: skip


def klass(kube: kubeapi.KubeApi, name: str) -> str | None:
    labels: Mapping[str, str] = kube.get(CLUSTERS, name)["metadata"].get("labels") or {}
    return labels.get(vocabulary.INTENSITY_CLASS)


def changes(kube: kubeapi.KubeApi) -> list[tuple[str, str]]:
    """(cluster, note) of every ``IntensityClassChanged`` Event, oldest first."""
    events = kube.items("events.events.k8s.io", "default")
    return [
        (e["regarding"]["name"], e["note"])
        for e in sorted(events, key=lambda e: int(e["metadata"]["resourceVersion"]))
        if e["reason"] == "IntensityClassChanged"
    ]


def patched(kube: kubeapi.KubeApi) -> list[str]:
    return [r.where.name for r in kube.calls("PATCH", CLUSTERS)]


async def test_every_cluster_gets_its_class_by_server_side_apply(kube: kubeapi.KubeApi) -> None:
    feed = Feed({"FR": 60.0, "DE": 300.0, "PL": 700.0})
    assert await labeler(kube, feed, Clock()).sync() == 3
    assert feed.wanted == set(ZONES.values())
    assert {n: klass(kube, n) for n in ZONES} == {
        "member-fr": "low",
        "member-de": "medium",
        "member-pl": "high",
    }
    for call in kube.calls("PATCH"):
        assert call.content_type == "application/apply-patch+yaml"
        assert call.query["fieldManager"] == "carbonshift"
        assert call.query["force"].lower() == "true"  # strconv.ParseBool reads "True" too
        meta: dict[str, Any] = call.body["metadata"]
        assert (call.body["apiVersion"], call.body["kind"]) == (testing.KARMADA_CLUSTER, "Cluster")
        assert set(meta["labels"]) == OURS  # only carbonshift's keys are sent
        assert set(meta["annotations"]) == ANNOTATIONS
    fr = kube.get(CLUSTERS, "member-fr")["metadata"]
    assert fr["labels"]["team"] == "infra"  # other managers' labels stay
    assert fr["labels"][vocabulary.ZONE] == "FR"
    assert fr["annotations"][vocabulary.INTENSITY_VALUE] == "60"
    assert fr["annotations"][vocabulary.INTENSITY_ZONE] == "FR"
    assert fr["annotations"][vocabulary.INTENSITY_SINCE] == vocabulary.format_time(NOW)
    assert sorted(n for n, _ in changes(kube)) == sorted(ZONES)
    # Nothing changed: nothing is written again.
    assert await labeler(kube, feed, Clock()).sync() == 0
    assert len(kube.calls("PATCH")) == 3


async def test_a_class_change_records_an_event(kube: kubeapi.KubeApi) -> None:
    feed, clock = Feed({"FR": 60.0, "DE": 300.0, "PL": 700.0}), Clock()
    leader = labeler(kube, feed, clock)
    await leader.sync()
    told = len(changes(kube))
    feed.values["DE"] = 480.0
    clock.advance(hours=1)
    assert await leader.sync() == 1
    assert patched(kube)[3:] == ["member-de"]
    assert klass(kube, "member-de") == "high"
    [(name, note)] = changes(kube)[told:]
    assert name == "member-de"
    assert note.startswith(f"{vocabulary.INTENSITY_CLASS}=high: medium -> high"), note
    since = kube.get(CLUSTERS, "member-de")["metadata"]["annotations"][vocabulary.INTENSITY_SINCE]
    assert since == vocabulary.format_time(clock())


async def test_a_cluster_hovering_at_a_threshold_keeps_its_class(kube: kubeapi.KubeApi) -> None:
    feed, clock = Feed({"FR": 60.0, "DE": 300.0, "PL": 700.0}), Clock()
    leader = labeler(kube, feed, clock)
    await leader.sync()
    told = len(changes(kube))
    for value in (410.0, 430.0, 395.0, 435.0):  # around high_from 400, inside the 10 % band
        feed.values["DE"] = value
        clock.advance(hours=1)
        await leader.sync()
        assert klass(kube, "member-de") == "medium", value
        held = kube.get(CLUSTERS, "member-de")["metadata"]["annotations"]
        assert held[vocabulary.INTENSITY_VALUE] == f"{value:.0f}"  # the reading, kept current
    assert changes(kube)[told:] == []
    feed.values["DE"] = 445.0  # past the band
    clock.advance(hours=1)
    await leader.sync()
    assert klass(kube, "member-de") == "high"
    assert [n for n, _ in changes(kube)[told:]] == ["member-de"]


async def test_stale_data_changes_nothing(kube: kubeapi.KubeApi) -> None:
    feed, clock = Feed({"FR": 60.0, "DE": 300.0, "PL": 700.0}), Clock()
    leader = labeler(kube, feed, clock)
    await leader.sync()
    stored = kube.items(CLUSTERS)
    writes = len(kube.writes())
    feed.values = {"FR": 900.0, "DE": 900.0, "PL": 10.0}
    feed.stale = True
    clock.advance(hours=2)
    assert await leader.sync() == 0
    assert len(kube.writes()) == writes
    assert kube.items(CLUSTERS) == stored


async def test_nothing_is_written_without_the_lease(kube: kubeapi.KubeApi) -> None:
    gate = kubeapi.Gate(leading=False)
    feed = Feed({"FR": 60.0, "DE": 300.0, "PL": 700.0})
    assert await labeler(kube, feed, Clock(), gate).sync() == 0
    assert kube.writes() == []
    # Leadership lost while the first Cluster is read: nothing is sent.
    gate.leading = True

    kube.before("GET", CLUSTERS, gate.lose, name="member-de")
    assert await labeler(kube, feed, Clock(), gate).sync() == 0
    assert kube.writes() == []
    assert all(klass(kube, n) is None for n in ZONES)


async def test_a_refused_write_is_read_again_next_pass(kube: kubeapi.KubeApi) -> None:
    feed = Feed({"FR": 60.0, "DE": 300.0, "PL": 700.0})
    leader = labeler(kube, feed, Clock())
    kube.fail("PATCH", CLUSTERS, 500)
    assert await leader.sync() == 2
    assert klass(kube, "member-de") is None  # the first one, in name order, was refused
    assert await leader.sync() == 1
    assert klass(kube, "member-de") == "medium"
    assert [r.where.name for r in kube.calls("GET", CLUSTERS) if r.where.name] == [
        "member-de",
        "member-fr",
        "member-pl",
        "member-de",
    ]


async def test_liqo_virtual_nodes_are_labelled_through_the_core_api(
    kube: kubeapi.KubeApi,
) -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "liqo-remote",
            "labels": {vocabulary.ZONE: "PL", "liqo.io/type": "virtual-node"}}}  # fmt: skip
    kube.add(node)
    feed = Feed({"PL": 700.0})
    assert await labeler(kube, feed, Clock(), resource=NODES).sync() == 1
    [read] = [r for r in kube.calls("GET", "nodes") if r.where.name]
    [patch] = kube.calls("PATCH")
    assert (read.where.group, patch.where.api_version) == ("", "v1")
    assert patch.where.resource == "nodes"
    assert patch.content_type == "application/apply-patch+yaml"
    stored = kube.get("nodes", "liqo-remote")["metadata"]
    assert stored["labels"][vocabulary.INTENSITY_CLASS] == "high"
    assert stored["labels"]["liqo.io/type"] == "virtual-node"
    [(name, _)] = changes(kube)
    assert name == "liqo-remote"
    assert all(klass(kube, n) is None for n in ZONES)  # the Clusters are another labeler's


async def test_a_zone_without_data_is_said_once_per_spell_on_the_cluster(
    kube: kubeapi.KubeApi,
) -> None:
    feed, clock = Feed({"FR": 60.0, "PL": 700.0}), Clock()  # no data for DE
    leader = labeler(kube, feed, clock)

    def missing() -> list[tuple[str, str, str]]:
        events = kube.items("events.events.k8s.io", "default")
        return [(e["regarding"]["name"], e["type"], e["note"]) for e in events
                if e["reason"] == "IntensityDataMissing"]  # fmt: skip

    await leader.sync()
    await leader.sync()
    [(name, kind, note)] = missing()
    assert (name, kind) == ("member-de", "Warning")
    assert "no carbon intensity data for grid zone DE" in note
    assert klass(kube, "member-de") is None  # nothing to label it with
    feed.values["DE"] = 300.0
    await leader.sync()
    assert klass(kube, "member-de") == "medium"
    del feed.values["DE"]
    await leader.sync()
    assert len(missing()) == 2  # a new spell


async def test_a_running_labeler_reconciles_the_clusters_a_change_touches(
    kube: kubeapi.KubeApi,
) -> None:
    feed, clock = Feed({"FR": 60.0, "DE": 300.0, "PL": 700.0}), Clock()
    leader = labeler(kube, feed, clock)
    leader.tick = 0.02

    def passes() -> float:
        return float(metrics.CONTROLLER_PASSES.labels(leader.name)._value.get())

    before = passes()
    leader.start()
    try:
        # Labelled at the term's start, then once more each as their new labels arrive
        # (nothing written): the queue is then idle until something changes.
        await eventually(
            lambda: len(patched(kube)) == 3 and passes() - before >= 6 and leader.queue.idle,
            "every Cluster labelled at the term's start, and settled",
            seen=lambda: (patched(kube), passes() - before, len(leader.queue)),
        )
        reads = len(kube.calls("GET", CLUSTERS))
        clock.advance(hours=1)
        feed.values["DE"] = 480.0  # a feed refresh: one zone's reading
        await eventually(lambda: klass(kube, "member-de") == "high", "DE relabelled",
                         seen=lambda: patched(kube))  # fmt: skip
        feed.values["SE"] = 20.0
        kube.add(testing.cluster("member-se", zone="SE"))  # a Cluster joins
        await eventually(lambda: klass(kube, "member-se") == "low", "the new Cluster labelled",
                         seen=lambda: patched(kube))  # fmt: skip
    finally:
        await leader.stop()
    assert patched(kube)[3:] == ["member-de", "member-se"]
    assert len(kube.calls("GET", CLUSTERS)) == reads + 1  # only the new Cluster is read
