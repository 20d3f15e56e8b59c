"""The leader's re-evaluation against an in-process API server (:mod:`tests.kubeapi`), through
the real Kubernetes client: a policy admitted when one member was greenest is replaced once
the grid turns (with the ``resourceVersion`` it was read with) and a ``CarbonRebalanced``
Event is recorded; a concurrent write means re-read, decide again, write once, and a second
one is counted as a conflict with nothing written; nothing is written without the Lease or
in a namespace that is not opted in; NodePools held paused are counted in the gauge."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from datetime import timedelta
from typing import Any

import pytest
from prometheus_client import REGISTRY

from tests import kubeapi
from tests.support import NOW, Clock, eventually, reading
from webhook import testing
from webhook.cli.preview import preview
from webhook.controllers import keeper as keeper_module
from webhook.controllers.follower import Follower
from webhook.controllers.karmada.rebalancer import Rebalancing
from webhook.decision.record import Record, switches
from webhook.kinds import Context
from webhook.kube.events import EventRecorder
from webhook.model.config import ClusterConfig, Config, parse
from webhook.model.intensity import IntensityTable
from webhook.model.vocabulary import DECISION, ENABLED
from webhook.runtime import metrics

POLICIES = "propagationpolicies"
PAUSED = "carbonshift_paused_nodepools"
CLUSTERS = {"a": "FR", "b": "DE", "c": "PL"}
ADMITTED = {"FR": 100.0, "DE": 400.0, "PL": 800.0}
"""The grid at admission: ``a`` (FR) greenest."""
TURNED = {"FR": 600.0, "DE": 100.0, "PL": 800.0}
"""The grid later: ``b`` (DE) far greener."""


class Grid:
    """What the feed holds now, at the clock's time."""

    def __init__(self, config: Config, values: Mapping[str, float]) -> None:
        self.config = config
        self.values = dict(values)
        self.clock = Clock(NOW)
        self.fleet = {n: ClusterConfig(name=n, zone=z) for n, z in CLUSTERS.items()}

    def table(self) -> IntensityTable:
        at = self.clock.hour()
        return {z: reading(z, v, valid_from=at, valid_to=at + timedelta(hours=1))
                for z, v in self.values.items()}  # fmt: skip

    def context(self) -> Context:
        return Context(self.config, self.table(), self.clock(), fleet=self.fleet)


def settings(**extra: Any) -> Config:
    return parse({
        "zone": "DE",
        "clusters": {n: {"zone": z} for n, z in CLUSTERS.items()},
        "hysteresis": {"margin": 0.1, "dwell_hours": 12},
        "reevaluate": {"min_interval_seconds": 1800, "forecast": "none"},
        **extra,
    })  # fmt: skip


def admitted(grid: Grid, obj: Mapping[str, Any]) -> dict[str, Any]:
    """``obj`` as admission stored it on ``grid`` now (its decision annotation set)."""
    [done] = preview([obj], grid.context())
    stored = dict(done.stored)
    assert DECISION in stored["metadata"]["annotations"], done.outcome
    return stored


def namespace(name: str, *, enabled: bool | None) -> dict[str, Any]:
    labels = {} if enabled is None else {ENABLED: str(enabled).lower()}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def weights(policy: Mapping[str, Any]) -> dict[str, int]:
    listed = policy["spec"]["placement"]["replicaScheduling"]["weightPreference"]
    return {
        e["targetCluster"]["clusterNames"][0]: e["weight"]
        for e in listed["staticWeightList"]
        if "clusterNames" in e["targetCluster"]
    }


def favoured(policy: Mapping[str, Any]) -> str:
    found = weights(policy)
    return max(found, key=found.__getitem__)


def counted(outcome: str, kind: str = "PropagationPolicy") -> float:
    return float(metrics.REEVALUATIONS.labels(kind, outcome)._value.get())


@pytest.fixture
async def kube() -> AsyncIterator[kubeapi.KubeApi]:
    async with kubeapi.serve() as server:
        yield server


@pytest.fixture
def grid() -> Grid:
    return Grid(settings(), ADMITTED)


def leader(kube: kubeapi.KubeApi, grid: Grid, gate: kubeapi.Gate | None = None) -> Follower:
    gate = gate or kubeapi.Gate()
    events = EventRecorder(kube.api, "replica-0", gate)
    return Follower(kube.api, grid.config, grid.context, gate, events=events)


def managed_policy(kube: kubeapi.KubeApi, grid: Grid, ns: str = "shop") -> dict[str, Any]:
    """A weighted policy admitted in the opted-in namespace ``ns`` while ``a`` was greenest,
    stored; the grid has turned 13 hours later (past the dwell and the minimum interval)."""
    kube.add(namespace(ns, enabled=True))
    policy = testing.propagation_policy(namespace=ns, strategy="weighted", created=grid.clock())
    stored = kube.add(admitted(grid, policy))
    assert favoured(stored) == "a"
    grid.values = dict(TURNED)
    grid.clock.advance(hours=13)
    return stored


async def test_a_turned_grid_replaces_the_policy_once_with_an_event(
    kube: kubeapi.KubeApi, grid: Grid
) -> None:
    stored = managed_policy(kube, grid)
    switched = counted("switched")
    assert await leader(kube, grid).sync() == 1
    [put] = kube.calls("PUT")
    assert put.where.namespace == "shop"
    assert put.where.name == "web"
    assert put.query["fieldManager"] == "carbonshift"
    assert put.body["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    now = kube.get(POLICIES, "web", "shop")
    assert favoured(now) == "b"
    assert now["metadata"]["resourceVersion"] != stored["metadata"]["resourceVersion"]
    (entry,) = switches(Record.decode(now["metadata"]["annotations"][DECISION]))
    assert entry["before"] > entry["after"]
    assert counted("switched") - switched == 1
    [event] = kube.items("events.events.k8s.io", "shop")
    assert event["reason"] == "CarbonRebalanced"
    assert event["type"] == "Normal"
    assert event["regarding"]["kind"] == "PropagationPolicy"
    assert event["regarding"]["uid"] == stored["metadata"]["uid"]
    assert "greener than the placement in force" in event["note"], event["note"]
    # The next pass finds the placement in force: nothing more is written.
    writes = len(kube.writes())
    assert await leader(kube, grid).sync() == 0
    assert len(kube.writes()) == writes


async def test_a_concurrent_write_is_read_again_decided_again_and_written_once(
    kube: kubeapi.KubeApi, grid: Grid
) -> None:
    managed_policy(kube, grid)

    def someone_labels(_: kubeapi.Request) -> None:
        kube.touch(POLICIES, "web", "shop", lambda o: o["metadata"]["labels"].update(team="x"))

    kube.before("PUT", POLICIES, someone_labels)
    conflicts = metrics.KUBE_CONFLICTS.labels("propagationpolicies.policy.karmada.io")
    before = conflicts._value.get()
    assert await leader(kube, grid).sync() == 1
    steps = [(r.method, r.where.name) for r in kube.calls(resource=POLICIES)]
    assert steps == [("GET", ""), ("PUT", "web"), ("GET", "web"), ("PUT", "web")]
    first, second = kube.calls("PUT", POLICIES)
    assert first.body["metadata"]["resourceVersion"] != second.body["metadata"]["resourceVersion"]
    now = kube.get(POLICIES, "web", "shop")
    assert now["metadata"]["labels"]["team"] == "x"  # the other write is kept
    assert favoured(now) == "b"
    assert conflicts._value.get() - before == 1
    assert [e["reason"] for e in kube.items("events")] == ["CarbonRebalanced"]


async def test_a_second_conflict_is_counted_and_nothing_is_written(
    kube: kubeapi.KubeApi, grid: Grid
) -> None:
    managed_policy(kube, grid)

    def someone_writes(_: kubeapi.Request) -> None:
        kube.touch(POLICIES, "web", "shop")

    kube.before("PUT", POLICIES, someone_writes, times=2)
    conflict = counted("conflict")
    assert await leader(kube, grid).sync() == 0
    assert len(kube.calls("PUT", POLICIES)) == 2
    assert counted("conflict") - conflict == 1
    assert favoured(kube.get(POLICIES, "web", "shop")) == "a"
    assert kube.items("events") == []


async def test_nothing_is_written_without_the_lease(kube: kubeapi.KubeApi, grid: Grid) -> None:
    managed_policy(kube, grid)
    gate = kubeapi.Gate(leading=False)
    assert await leader(kube, grid, gate).sync() == 0
    assert kube.writes() == []
    # Leadership lost between the list and the write: still nothing.
    gate.leading = True

    kube.before("GET", POLICIES, gate.lose)
    assert await leader(kube, grid, gate).sync() == 0
    assert kube.writes() == []
    assert favoured(kube.get(POLICIES, "web", "shop")) == "a"


async def test_a_namespace_not_opted_in_is_never_touched(kube: kubeapi.KubeApi, grid: Grid) -> None:
    managed_policy(kube, grid, "shop")
    # Admitted while opted in, then the namespace was opted out (or lost its label).
    grid.clock.advance(hours=-13)
    grid.values = dict(ADMITTED)
    policy = testing.propagation_policy(namespace="legacy", strategy="weighted")
    kube.add(admitted(grid, policy))
    kube.add(namespace("legacy", enabled=None))
    grid.values = dict(TURNED)
    grid.clock.advance(hours=13)
    assert await leader(kube, grid).sync() == 1
    assert [(r.where.namespace, r.where.name) for r in kube.calls("PUT")] == [("shop", "web")]
    assert favoured(kube.get(POLICIES, "web", "legacy")) == "a"
    assert [r.query.get("labelSelector") for r in kube.calls("GET", "namespaces")] == [
        f"{ENABLED}=true"
    ]


async def test_nodepools_held_paused_are_counted_in_the_gauge(kube: kubeapi.KubeApi) -> None:
    grid = Grid(settings(), {"DE": 480.0})  # the local grid is dirty
    paused = testing.nodepool("batch", enabled=True, strategy="pause", limits={"cpu": "100"})
    free = testing.nodepool("web", enabled=True, strategy="weight")
    other = testing.nodepool("theirs", limits={"cpu": "0"})  # not managed
    for pool in (paused, free):
        kube.add(admitted(grid, pool))
    kube.add(other)
    assert kube.get("nodepools", "batch")["spec"]["limits"] == {"cpu": "0"}
    first = leader(kube, grid)  # registers the NodePool kind's gauge
    assert REGISTRY.get_sample_value(PAUSED) is not None
    metrics.tally(PAUSED, "").set(-1)
    grid.clock.advance(minutes=5)
    assert await first.sync() == 0
    assert REGISTRY.get_sample_value(PAUSED) == 1
    assert kube.calls("PUT") == []
    # The grid turns clean: the pool is resumed, its limits back, and the gauge follows
    # (the other pool's weight rises with it).
    grid.values["DE"] = 100.0
    grid.clock.advance(minutes=5)
    assert await leader(kube, grid).sync() == 2
    assert sorted(r.where.name for r in kube.calls("PUT")) == ["batch", "web"]
    assert kube.get("nodepools", "batch")["spec"]["limits"] == {"cpu": "100"}
    assert REGISTRY.get_sample_value(PAUSED) == 0
    told = {(e["regarding"]["name"], e["reason"]) for e in kube.items("events", "default")}
    assert told == {("batch", "NodePoolResumed"), ("web", "CarbonRebalanced")}


async def test_without_the_namespaces_only_cluster_scoped_kinds_are_followed(
    kube: kubeapi.KubeApi,
) -> None:
    grid = Grid(settings(), {"DE": 480.0})  # the local grid is dirty: the pool is paused
    pool = testing.nodepool("batch", enabled=True, strategy="pause", limits={"cpu": "100"})
    kube.add(admitted(grid, pool))
    assert kube.get("nodepools", "batch")["spec"]["limits"] == {"cpu": "0"}
    grid.values["DE"] = 100.0
    grid.clock.advance(minutes=5)
    kube.fail("GET", "namespaces", 500)
    assert await leader(kube, grid).sync() == 1
    assert kube.get("nodepools", "batch")["spec"]["limits"] == {"cpu": "100"}
    # Namespaced kinds wait until the opted-in namespaces can be listed.
    assert [w.where.resource for w in kube.writes() if w.where.resource != "events"] == [
        "nodepools"
    ]


class Fed(Grid):
    """A grid whose contexts carry the feed's generation (what the leader's memo keys on)."""

    generation = 1
    fleet_generation = 1

    def context(self) -> Context:
        ctx = super().context()
        return Context(ctx.config, ctx.table, ctx.now, generation=self.generation,
                       fleet=ctx.fleet, fleet_generation=self.fleet_generation)  # fmt: skip


def counting(loop: Follower) -> list[int]:
    """Count the decisions ``loop`` makes (not the verdicts it holds)."""
    made = [0]
    decide = loop.rules.decide

    def counted_decide(*args: Any) -> Any:
        made[0] += 1
        return decide(*args)

    loop.rules.decide = counted_decide  # type: ignore[method-assign]
    return made


async def test_unchanged_inputs_are_kept_without_deciding_again(kube: kubeapi.KubeApi) -> None:
    grid = Fed(settings(), ADMITTED)
    kube.add(namespace("shop", enabled=True))
    policy = testing.propagation_policy(namespace="shop", strategy="weighted", created=grid.clock())
    stored = kube.add(admitted(grid, policy))
    loop = leader(kube, grid)
    made = counting(loop)
    assert await loop.sync() == 0
    assert made[0] == 1
    assert await loop.sync() == 0
    assert made[0] == 1  # same object, intensities and fleet: the kept verdict holds
    grid.generation = 2
    assert await loop.sync() == 0
    assert made[0] == 1  # a refresh that changed none of its zones' readings
    grid.values["PL"] += 1.0
    grid.generation = 3
    assert await loop.sync() == 0
    assert made[0] == 2  # a reading it read changed: decided again
    stored["metadata"]["labels"] = {"team": "web"}
    kube.add(stored)  # a new resourceVersion
    assert await loop.sync() == 0
    assert made[0] == 3


async def test_a_refresh_decides_again_only_the_objects_that_read_a_changed_zone(
    kube: kubeapi.KubeApi,
) -> None:
    grid = Fed(settings(), ADMITTED)
    kube.add(namespace("shop", enabled=True))
    for name, clusters in (("everywhere", None), ("fr-de", ["a", "b"]), ("de-pl", ["b", "c"])):
        policy = testing.propagation_policy(
            name, namespace="shop", strategy="weighted", created=grid.clock(), clusters=clusters
        )
        kube.add(admitted(grid, policy))
    loop = leader(kube, grid)
    await loop.sync()
    queued: list[Any] = []
    loop.enqueue = queued.extend  # type: ignore[method-assign]
    grid.generation = 2
    grid.values["FR"] += 5.0  # only France's reading changed
    loop.poll()
    assert sorted(name for _, name in queued) == ["shop/everywhere", "shop/fr-de"]
    queued.clear()
    grid.generation = 3
    loop.poll()  # a refresh with no reading changed
    assert queued == []
    grid.generation = 4
    grid.values["JP-TK"] = 500.0  # a zone no policy reads
    loop.poll()
    assert queued == []
    grid.fleet = {**grid.fleet, "d": ClusterConfig(name="d", zone="JP-TK")}
    grid.fleet_generation = 2
    loop.poll()  # the fleet changed: everything
    assert len(queued) == 3, queued


async def test_a_verdict_kept_by_the_dwell_is_decided_again_when_the_dwell_ends(
    kube: kubeapi.KubeApi,
) -> None:
    grid = Fed(settings(), ADMITTED)
    kube.add(namespace("shop", enabled=True))
    policy = testing.propagation_policy(namespace="shop", strategy="weighted", created=grid.clock())
    kube.add(admitted(grid, policy))
    grid.values = dict(TURNED)
    grid.clock.advance(hours=2)  # within the 12 h dwell
    loop = leader(kube, grid)
    assert await loop.sync() == 0  # kept: the dwell
    grid.clock.advance(hours=11)  # the same feed generation, the dwell over
    assert await loop.sync() == 1
    assert favoured(kube.get(POLICIES, "web", "shop")) == "b"


async def test_a_pass_lists_a_page_at_a_time_and_decides_every_object(
    kube: kubeapi.KubeApi, grid: Grid, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Five turned policies in pages of two: every page is decided and written, and the
    # list calls carry the page size and the continue token the API server gave.
    monkeypatch.setattr("webhook.kube.client.LIST_PAGE", 2)
    kube.add(namespace("shop", enabled=True))
    for n in range(5):
        policy = testing.propagation_policy(
            f"web-{n}", namespace="shop", strategy="weighted", created=grid.clock()
        )
        kube.add(admitted(grid, policy))
    grid.values = dict(TURNED)
    grid.clock.advance(hours=13)
    assert await leader(kube, grid).sync() == 5
    assert all(favoured(kube.get(POLICIES, f"web-{n}", "shop")) == "b" for n in range(5))
    listed = [c for c in kube.calls("GET") if c.where.resource == POLICIES and not c.where.name]
    assert [c.query.get("limit") for c in listed] == ["2", "2", "2"]
    assert [bool(c.query.get("continue")) for c in listed] == [False, True, True]


def running_leader(kube: kubeapi.KubeApi) -> tuple[Fed, Follower]:
    """A leader to start, on a grid fed by the test (the safety net an hour away), with
    one weighted policy admitted in the opted-in namespace ``shop``."""
    grid = Fed(settings(reevaluate={"min_interval_seconds": 1800, "forecast": "none",
                                    "interval_seconds": 3600}), ADMITTED)  # fmt: skip
    kube.add(namespace("shop", enabled=True))
    first = testing.propagation_policy(namespace="shop", strategy="weighted", created=grid.clock())
    kube.add(admitted(grid, first))
    loop = leader(kube, grid)
    loop.tick = 0.01
    return grid, loop


async def test_as_a_controller_it_acts_on_changes_not_on_a_clock(kube: kubeapi.KubeApi) -> None:
    # The follower as the leader runs it: watched caches, one key at a time. Nothing is
    # decided while nothing changes; the grid turning (a new feed generation) decides
    # every object again; a policy added later is decided from its watch event alone.
    grid, loop = running_leader(kube)
    made = counting(loop)
    loop.start()
    try:
        await eventually(lambda: made[0] == 1, "the first sync", seen=lambda: made[0])
        await eventually(lambda: loop.queue.idle, "idle")
        idle = made[0]
        for _ in range(20):  # twenty ticks of the runner: nothing changed, nothing decided
            await asyncio.sleep(0)
        assert made[0] == idle
        grid.values = dict(TURNED)
        grid.clock.advance(hours=13)
        grid.generation = 2
        await eventually(lambda: favoured(kube.get(POLICIES, "web", "shop")) == "b",
                         "the policy switched", seen=lambda: made[0])  # fmt: skip
        later = testing.propagation_policy(
            "late", namespace="shop", strategy="weighted", created=grid.clock()
        )
        kube.add(admitted(grid, later))
        await eventually(lambda: ("PropagationPolicy", "shop/late") in loop._held,
                         "the new policy decided", seen=lambda: set(loop._held))  # fmt: skip
    finally:
        await asyncio.wait_for(loop.stop(), 10)


async def test_the_keepers_look_again_when_a_members_room_changes(
    kube: kubeapi.KubeApi, grid: Grid, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keeper_module, "MOVED_SECONDS", 0.0)
    rooms = [0]
    gate = kubeapi.Gate()
    loop = Follower(kube.api, grid.config, grid.context, gate)
    keepers = Rebalancing(loop, rooms=lambda: rooms[0])
    await loop.sync()  # decides every object, then the keepers run once
    assert not keepers.changed()  # nothing moved since
    keepers._took = 0.0  # as if the pass took no time: room may call the next at once
    rooms[0] += 1  # a Cluster's resource summary changed
    assert keepers.changed()
    await keepers.reconcile()
    keepers._took = 0.0
    assert not keepers.changed()
    keepers._took = 3600.0  # a pass that took an hour: room alone waits three
    rooms[0] += 1
    assert not keepers.changed()


class _Keeping(keeper_module.Keeper):
    """A keeper of policies that notes how they stand at each run; its first run on a
    policy favouring ``b`` raises."""

    name = "keeping"
    kinds = frozenset({"PropagationPolicy"})

    def __init__(self, follower: Follower) -> None:
        super().__init__(follower)
        self.tick = 0.01
        self.runs: list[tuple[str, ...]] = []
        self.standing: dict[Any, str | None] = {}

    def stand(self, key: Any, obj: dict[str, Any], *, rewritten: bool) -> bool:
        before, self.standing[key] = self.standing.get(key), favoured(obj)
        return before != self.standing[key]

    async def keep(self, ctx: Context) -> int:
        self.runs.append(tuple(sorted(str(v) for v in self.standing.values())))
        if self.runs[-1] == ("b",) and self.runs.count(("b",)) == 1:
            raise RuntimeError("a refused write")
        return 0


async def test_a_running_keeper_runs_once_settled_and_retries_a_failure(
    kube: kubeapi.KubeApi,
) -> None:
    # A keeper is a keyed controller with one key: queued once the follower has settled
    # after a change, never on a clock alone (the safety net is an hour away), and
    # retried with its back-off when a run raised.
    grid, loop = running_leader(kube)
    keeping = _Keeping(loop)
    loop.start()
    keeping.start()
    try:
        # (A run may come first on nothing yet, before the namespaces are listed.)
        await eventually(lambda: keeping.runs[-1:] == [("a",)], "a run after the first sync",
                         seen=lambda: keeping.runs)  # fmt: skip
        await eventually(lambda: loop.queue.idle and keeping.queue.idle, "idle")
        runs = len(keeping.runs)
        for _ in range(20):  # twenty ticks: nothing changed, no run
            await asyncio.sleep(0.01)
        assert len(keeping.runs) == runs
        grid.values = dict(TURNED)
        grid.clock.advance(hours=13)
        grid.generation = 2
        # The switch to b: a run (which raises: the keeper's second), then its retry.
        await eventually(lambda: ("b",) in keeping.runs[runs + 1 :], "the retried run",
                         seen=lambda: keeping.runs)  # fmt: skip
        assert keeping.runs[runs:] == [("b",), ("b",)]
        await eventually(lambda: keeping.queue.failures(keeper_module.FLEET) == 0,
                         "the back-off reset")  # fmt: skip
    finally:
        await asyncio.wait_for(keeping.stop(), 10)
        await asyncio.wait_for(loop.stop(), 10)
