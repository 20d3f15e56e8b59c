"""The leader's moves back to greener tiers against the in-process API server
(:mod:`tests.kubeapi`: Clusters with resource summaries, ResourceBindings,
WorkloadRebalancers, Events): a move becomes one WorkloadRebalancer and one Event; room is
shared by the bindings of one pass; a binding in flight waits; the budgets are per policy
and for the fleet over an hour; nothing is written without the Lease."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import AsyncIterator, Mapping
from typing import Any

import msgspec
import orjson
import pytest
from kubernetes_asyncio import client

from tests import kubeapi
from tests.support import NOW, reading
from webhook import testing
from webhook.controllers.karmada import rebalancer as rebalancer_module
from webhook.controllers.karmada.rebalancer import (
    Fill,
    Named,
    Rebalancer,
    Tiers,
    _listed_binding,
    _slim_binding,
    _slim_listed_binding,
)
from webhook.decision.karmada.bindings import owner, pending, with_allocating
from webhook.decision.karmada.capacity import assess_move
from webhook.decision.karmada.terms import GREEN_TERM, TIER_TERM
from webhook.decision.record import Record
from webhook.kinds import Context
from webhook.kube.cache import Head
from webhook.kube.events import EventRecorder
from webhook.kube.writes import NotLeader
from webhook.model.config import ClusterConfig, Config, parse
from webhook.model.vocabulary import DECISION
from webhook.runtime import metrics

BINDINGS = "resourcebindings"
REBALANCERS = "workloadrebalancers"
ZONES = {"green": "SE-SE3", "mid": "FR", "dirty": "PL"}
VALUES = {"SE-SE3": 25.0, "FR": 100.0, "PL": 800.0}


def cluster(name: str, cpus: int, used: int = 0) -> dict[str, Any]:
    return testing.cluster(name, summary=testing.resource_summary(cpus, used=used))


FILL = {"clusterAffinities": [{
    "affinityName": GREEN_TERM, "clusterNames": ["green"],
    "overflowAffinities": [
        {"affinityName": f"{TIER_TERM}1", "clusterNames": ["mid"]},
        {"affinityName": f"{TIER_TERM}2", "clusterNames": ["dirty"]},
    ],
}]}  # fmt: skip
"""The green-first terms of an ordered fill, as admission writes them."""


def fill_policy(name: str, namespace: str = "shop", *, managed: bool = True) -> dict[str, Any]:
    annotations = {DECISION: "{}"} if managed else None
    return testing.propagation_policy(
        name, namespace=namespace, uid=f"uid-{name}", annotations=annotations, placement=FILL
    )


def binding(policy: str, clusters: Mapping[str, int], namespace: str = "shop") -> dict[str, Any]:
    return {
        "apiVersion": "work.karmada.io/v1alpha2",
        "kind": "ResourceBinding",
        "metadata": {
            "name": f"{policy}-deployment", "namespace": namespace, "uid": f"rb-{policy}",
            "annotations": {"propagationpolicy.karmada.io/name": policy,
                            "propagationpolicy.karmada.io/namespace": namespace},
        },
        "spec": {
            "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": policy,
                         "namespace": namespace},
            "replicas": sum(clusters.values()),
            "replicaRequirements": {"resourceRequest": {"cpu": "1", "memory": "64Mi"}},
            "clusters": [{"name": c, "replicas": n} for c, n in clusters.items()],
        },
        "status": {"lastScheduledTime": "2026-01-01T11:00:00Z"},
    }  # fmt: skip


@dataclasses.dataclass
class Karmada:
    """The Karmada objects of a test, held by the in-process API server."""

    kube: kubeapi.KubeApi

    def seed(self, clusters: list[dict[str, Any]], bindings: list[dict[str, Any]]) -> None:
        for obj in [*clusters, *bindings]:
            self.kube.add(obj)

    def rebind(self, held: dict[str, Any]) -> None:
        """Karmada rescheduled the binding: it now stands as ``held``."""
        meta = held["metadata"]
        self.kube.touch(BINDINGS, meta["name"], meta["namespace"], lambda o: o.update(held))

    @property
    def rebalancers(self) -> list[dict[str, Any]]:
        return self.kube.items(REBALANCERS)

    def finish(self) -> None:
        """Every WorkloadRebalancer has finished."""
        status = {"finishTime": "2026-01-01T12:00:01Z"}
        for done in self.rebalancers:
            name = done["metadata"]["name"]
            self.kube.touch(REBALANCERS, name, change=lambda o: o.update(status=status))

    def expire(self) -> None:
        """Every WorkloadRebalancer is gone (its TTL after finishing)."""
        for done in self.rebalancers:
            self.kube.remove(REBALANCERS, done["metadata"]["name"])

    @property
    def events(self) -> list[dict[str, Any]]:
        return self.kube.items("events.events.k8s.io")

    @property
    def selectors(self) -> list[str]:
        return [r.query.get("labelSelector", "") for r in self.kube.calls("GET", REBALANCERS)]


@pytest.fixture
async def karmada() -> AsyncIterator[tuple[Karmada, client.ApiClient]]:
    async with kubeapi.serve() as kube:
        yield Karmada(kube), kube.api


def context(config: Config) -> Context:
    fleet = {n: ClusterConfig(name=n, zone=z) for n, z in ZONES.items()}
    table = {z: reading(z, v) for z, v in VALUES.items()}
    return Context(config, table, NOW, fleet=fleet)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Relisted(Rebalancer):
    """A rebalancer reading watched caches, each brought up to date before a pass (as a
    watch keeps them)."""

    api: client.ApiClient

    async def rebalance(self, *args: Any, **kwargs: Any) -> Any:
        assert self.watched is not None
        for cache in self.watched.caches:
            await cache.list_once(self.api)
        return await super().rebalance(*args, **kwargs)


@pytest.fixture(params=["listed", "watched"])
def reading_from(request: pytest.FixtureRequest) -> str:
    """Whether the rebalancer lists on each pass or reads watched caches."""
    return str(request.param)


def rebalancer(
    api: client.ApiClient,
    gate: kubeapi.Gate | None = None,
    clock: Clock | None = None,
    watched: bool = False,
    **rules: Any,
) -> tuple[Rebalancer, Config]:
    config = parse({"rebalance": rules})
    gate = gate or kubeapi.Gate()
    events = EventRecorder(api, "test", gate)
    if watched:
        planner = Relisted(api, config, gate, events=events, clock=clock or Clock(),
                           watched=rebalancer_module.Watched.of())  # fmt: skip
        planner.api = api
        return planner, config
    return Rebalancer(api, config, gate, events=events, clock=clock or Clock()), config


def moved_total() -> float:
    return metrics.REPLICAS_MOVED._value.get()  # type: ignore[no-any-return]


async def test_a_move_back_is_one_workload_rebalancer_and_one_event(
    karmada: tuple[Karmada, client.ApiClient],
) -> None:
    fake, api = karmada
    fake.seed(
        [cluster("green", 4, used=1), cluster("mid", 8, used=8), cluster("dirty", 64)],
        [binding("web", {"green": 1, "mid": 8, "dirty": 1})],
    )
    before = moved_total()
    planner, config = rebalancer(api)
    got = await planner.rebalance([fill_policy("web")], context(config))
    assert got == {"moved": 1}
    assert moved_total() - before == 3
    [created] = fake.rebalancers
    assert created["metadata"]["name"].startswith("carbonshift-")
    assert created["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "carbonshift"}
    assert created["spec"] == {
        "workloads": [
            {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "namespace": "shop"}
        ],
        "ttlSecondsAfterFinished": 600,
    }
    assert fake.selectors == ["app.kubernetes.io/managed-by=carbonshift"]
    [event] = fake.events
    assert event["reason"] == "CarbonReplicasMoved"
    assert event["regarding"]["kind"] == "PropagationPolicy"
    assert event["metadata"]["namespace"] == "shop"
    note = event["note"]
    assert "dirty -1, green +3, mid -2" in note, note
    assert "expected intensity 162 -> 70 gCO2eq/kWh" in note, note
    assert "expected saving" in note, note


async def test_bindings_of_one_pass_share_the_room_and_moves_in_flight_wait(
    karmada: tuple[Karmada, client.ApiClient], reading_from: str
) -> None:
    fake, api = karmada
    fake.seed(
        [cluster("green", 4, used=1), cluster("mid", 8, used=6), cluster("dirty", 64)],
        [binding("a", {"mid": 3}), binding("b", {"mid": 3})],
    )
    planner, config = rebalancer(api, watched=reading_from == "watched")
    policies = [fill_policy("a"), fill_policy("b")]
    # green has room for 3: the first binding takes it all, the second finds none.
    assert await planner.rebalance(policies, context(config)) == {"moved": 1, "no_room": 1}
    assert len(fake.rebalancers) == 1
    # The next pass: our rebalancer has not finished, and the room it claimed stays taken.
    assert await planner.rebalance(policies, context(config)) == {"in_flight": 1, "no_room": 1}
    # Finished, and the binding rescheduled: still claimed for the grace period.
    fake.finish()
    fake.rebind(binding("a", {"green": 3}))
    assert await planner.rebalance(policies, context(config)) == {"no_room": 1}
    assert len(fake.rebalancers) == 1


async def test_a_binding_is_planned_again_only_when_what_its_plan_read_changed(
    karmada: tuple[Karmada, client.ApiClient], monkeypatch: pytest.MonkeyPatch, reading_from: str
) -> None:
    fake, api = karmada
    fake.seed(
        [cluster("green", 4, used=4), cluster("mid", 8, used=8), cluster("dirty", 64)],
        [binding("a", {"dirty": 2}), binding("b", {"mid": 1, "dirty": 1})],
    )
    plans: list[int] = []
    real = rebalancer_module.assess_move

    def counted(*args: Any, **kwargs: Any) -> Any:
        plans.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(rebalancer_module, "assess_move", counted)
    clock = Clock()
    planner, config = rebalancer(api, clock=clock, watched=reading_from == "watched")
    policies = [fill_policy("a"), fill_policy("b")]
    assert await planner.rebalance(policies, context(config)) == {"no_room": 2}
    assert len(plans) == 2
    # Nothing changed: the verdicts stand without planning.
    assert await planner.rebalance(policies, context(config)) == {"no_room": 2}
    assert len(plans) == 2
    # Room for two on the greenest cluster (its Cluster changed): both are planned again.
    summary = testing.resource_summary(4, used=2)
    fake.kube.touch(
        "clusters", "green", change=lambda o: o["status"].update(resourceSummary=summary)
    )
    assert await planner.rebalance(policies, context(config)) == {"moved": 1, "no_room": 1}
    assert len(plans) == 4
    # a's move in flight, b's verdict holds.
    assert await planner.rebalance(policies, context(config)) == {"in_flight": 1, "no_room": 1}
    assert len(plans) == 4
    # a rescheduled (a new resourceVersion): a is planned again, b holds.
    fake.finish()
    fake.rebind(binding("a", {"green": 2}))
    await planner.rebalance(policies, context(config))
    assert len(plans) == 5
    # The claim of a's move lapses: the room it held counts again, so both are planned.
    clock.now += 31
    await planner.rebalance(policies, context(config))
    assert len(plans) == 7


async def test_the_bindings_of_a_policy_the_pass_rewrote_wait_for_karmada(
    karmada: tuple[Karmada, client.ApiClient],
) -> None:
    fake, api = karmada
    fake.seed(
        [cluster("green", 4, used=1), cluster("mid", 8, used=8), cluster("dirty", 64)],
        [binding("web", {"green": 1, "mid": 8, "dirty": 1})],
    )
    clock = Clock()
    planner, config = rebalancer(api, clock=clock)
    rewritten = [("PropagationPolicy", "shop", "web")]
    got = await planner.rebalance([fill_policy("web")], context(config), rewritten)
    assert got == {"in_flight": 1}
    # The next run, before Karmada has taken the new placement into the binding (it is
    # unchanged): it still waits rather than race Karmada's reschedule with a move.
    assert await planner.rebalance([fill_policy("web")], context(config)) == {"in_flight": 1}
    assert fake.rebalancers == []
    # Karmada updated the binding (scheduled where it stood): planned again, and moved.
    fake.rebind(binding("web", {"green": 1, "mid": 8, "dirty": 1}))
    assert await planner.rebalance([fill_policy("web")], context(config)) == {"moved": 1}


async def test_a_rewritten_policys_binding_waits_no_longer_than_a_claims_grace(
    karmada: tuple[Karmada, client.ApiClient],
) -> None:
    fake, api = karmada
    fake.seed(
        [cluster("green", 4, used=1), cluster("mid", 8, used=8), cluster("dirty", 64)],
        [binding("web", {"green": 1, "mid": 8, "dirty": 1})],
    )
    clock = Clock()
    planner, config = rebalancer(api, clock=clock)
    rewritten = [("PropagationPolicy", "shop", "web")]
    await planner.rebalance([fill_policy("web")], context(config), rewritten)
    clock.now += rebalancer_module.CLAIM_GRACE_SECONDS + 1  # Karmada never touched it
    assert await planner.rebalance([fill_policy("web")], context(config)) == {"moved": 1}


def test_a_binding_karmadas_scheduler_has_not_observed_is_pending() -> None:
    scheduled = binding("web", {"mid": 3})
    scheduled["metadata"]["generation"] = 3
    scheduled["status"]["schedulerObservedGeneration"] = 3
    assert not pending(scheduled)
    scheduled["metadata"]["generation"] = 4  # a new placement, not scheduled yet
    assert pending(scheduled)


def test_a_reschedule_asked_for_and_not_done_is_pending() -> None:
    waiting = binding("web", {"mid": 3})
    waiting["spec"]["rescheduleTriggeredAt"] = "2026-01-01T11:30:00Z"
    assert pending(waiting)
    waiting["status"]["lastScheduledTime"] = "2026-01-01T11:30:02Z"
    assert not pending(waiting)
    waiting["spec"]["replicas"] = 4  # scaled, not divided yet
    assert pending(waiting)


async def test_budgets_per_policy_and_fleet_over_a_sliding_hour(
    karmada: tuple[Karmada, client.ApiClient],
) -> None:
    fake, api = karmada
    fake.seed(
        [cluster("green", 64), cluster("mid", 8), cluster("dirty", 64)],
        [binding("a", {"dirty": 3}), binding("b", {"dirty": 3})],
    )
    clock = Clock()
    planner, config = rebalancer(api, clock=clock, max_moves_per_policy=3, max_moves_per_hour=4)
    ctx = context(config)
    policies = [fill_policy("a"), fill_policy("b")]
    assert await planner.rebalance(policies, ctx) == {"moved": 1, "over_budget": 1}
    # An hour later the fleet budget is back (a's move has landed by now).
    fake.expire()
    fake.rebind(binding("a", {"green": 3}))
    clock.now += 3600 + 1
    assert await planner.rebalance(policies, ctx) == {"moved": 1}
    # A policy allowed fewer moves than it needs never moves.
    small, config = rebalancer(api, max_moves_per_policy=2)
    fake.expire()
    fake.seed([], [binding("c", {"dirty": 3})])
    assert await small.rebalance([fill_policy("c")], context(config)) == {"over_budget": 1}


async def test_a_move_not_worth_its_cost_is_not_asked_for(
    karmada: tuple[Karmada, client.ApiClient],
) -> None:
    fake, api = karmada
    fake.seed(
        [cluster("green", 64), cluster("mid", 8), cluster("dirty", 64)],
        [binding("web", {"mid": 2})],
    )
    planner, config = rebalancer(api, horizon_hours=0.25, move_cost_hours=1, margin=1)
    assert await planner.rebalance([fill_policy("web")], context(config)) == {"not_worth_it": 1}
    assert fake.rebalancers == []


async def test_unmanaged_policies_and_other_bindings_are_left_alone(
    karmada: tuple[Karmada, client.ApiClient],
) -> None:
    fake, api = karmada
    weighted = fill_policy("weighted")
    weighted["spec"]["placement"] = {"replicaScheduling": {"replicaSchedulingType": "Divided"}}
    fake.seed(
        [cluster("green", 64), cluster("mid", 8), cluster("dirty", 64)],
        [
            binding("plain", {"dirty": 2}),
            binding("weighted", {"dirty": 2}),
            binding("web", {"green": 2}),  # where it belongs
            binding("web", {"dirty": 2}, namespace="other"),  # another namespace's policy
        ],
    )
    planner, config = rebalancer(api)
    policies = [fill_policy("plain", managed=False), weighted, fill_policy("web")]
    assert await planner.rebalance(policies, context(config)) == {}
    assert fake.rebalancers == []
    assert planner.window.used(None) == 0


async def test_nothing_is_written_without_the_lease(
    karmada: tuple[Karmada, client.ApiClient],
) -> None:
    fake, api = karmada
    fake.seed(
        [cluster("green", 64), cluster("mid", 8), cluster("dirty", 64)],
        [binding("web", {"dirty": 3})],
    )
    gate = kubeapi.Gate(leading=False)
    planner, config = rebalancer(api, gate=gate)
    with pytest.raises(NotLeader):
        await planner.rebalance([fill_policy("web")], context(config))
    assert fake.rebalancers == []
    assert fake.events == []


def test_links_and_room_arithmetic() -> None:
    cpp = {"metadata": {"annotations": {"clusterpropagationpolicy.karmada.io/name": "all"}}}
    assert owner(cpp) == ("ClusterPropagationPolicy", "", "all")
    assert owner({"metadata": {}}) is None
    from decimal import Decimal  # noqa: PLC0415

    grown = with_allocating(testing.resource_summary(4), {"cpu": Decimal(3), "pods": Decimal(3)})
    assert isinstance(grown, dict)
    assert grown["allocating"] == {"cpu": "3", "pods": "3"}


def test_a_fill_plans_on_the_tiers_a_fresh_fill_can_reach_with_the_same_result() -> None:
    # Fill.reach drops the tiers after the last one holding replicas (unless replicas run
    # outside every tier): assess_move on them decides exactly what it does on all tiers.
    rng = random.Random(5)
    rule = Config().rebalance
    for _ in range(2_000):
        names = [f"c{k}" for k in range(rng.randint(1, 12))]
        rng.shuffle(names)
        cuts = sorted(rng.sample(range(1, len(names)), rng.randint(0, len(names) - 1)))
        tiers = [names[i:j] for i, j in zip([0, *cuts], [*cuts, len(names)], strict=True)]
        outside = ["gone"] if rng.random() < 0.2 else []
        pool = [*names, *outside]
        running = rng.sample(pool, rng.randint(1, min(3, len(pool))))
        current = {c: rng.randint(1, 4) for c in running}
        room = {c: rng.randint(0, 6) for c in [*names, *outside]}
        values = {c: rng.choice([None, *range(20, 800, 60)]) for c in room}
        placement = {"clusterAffinities": [{
            "affinityName": GREEN_TERM, "clusterNames": tiers[0],
            "overflowAffinities": [
                {"affinityName": f"{TIER_TERM}{k}", "clusterNames": t}
                for k, t in enumerate(tiers[1:], 1)
            ],
        }]}  # fmt: skip
        policy = testing.propagation_policy(
            "p", uid="u", annotations={DECISION: "{}"}, placement=placement
        )
        fill = Fill.of(policy)
        assert fill is not None
        assert [list(t) for t in fill.tiers] == tiers
        everything = [*tiers, [c for c in current if c not in fill.named]]
        whole = assess_move(current, everything, room, values, rule, budget=50)
        assert assess_move(current, fill.reach(current), room, values, rule, budget=50) == whole


def groups_policy(config: Config) -> dict[str, Any]:
    """A plain Divided policy as admission stores it where Karmada has no overflow tiers:
    failover groups, green, then green and mid, then all three."""
    from webhook import kinds  # noqa: PLC0415
    from webhook.decision.follow import apply  # noqa: PLC0415
    from webhook.decision.outcome import stored  # noqa: PLC0415

    row = kinds.find("policy.karmada.io", "PropagationPolicy")
    assert row is not None
    policy = testing.propagation_policy(
        "web", namespace="shop", uid="uid-web", clusters=list(ZONES)
    )
    decision = row.decide(policy, context(config))
    return apply(policy, stored(policy, decision, row.scope).changes)


async def test_failover_groups_move_back_by_renaming_them(
    karmada: tuple[Karmada, client.ApiClient],
) -> None:
    """Karmada before 1.18 never returns a binding to an earlier term, a Fresh reschedule
    included: the move back renames the groups (one update guarded by the resourceVersion
    read), and Karmada schedules the binding again from the greenest term."""
    fake, api = karmada
    planner, config = rebalancer(api)
    stored = fake.kube.add(groups_policy(config))
    names = [t["affinityName"] for t in stored["spec"]["placement"]["clusterAffinities"]]
    assert names == [GREEN_TERM, "carbonshift-group-1", "carbonshift-group-2"]
    held = binding("web", {"green": 1, "dirty": 9})
    held["status"]["schedulerObservedAffinityName"] = "carbonshift-group-2"
    fake.seed(
        [cluster("green", 16, used=1), cluster("mid", 8, used=8), cluster("dirty", 64)], [held]
    )
    before = moved_total()
    assert await planner.rebalance([stored], context(config)) == {"moved": 1}
    assert moved_total() - before == 9
    assert fake.rebalancers == []  # a WorkloadRebalancer would start from the observed term
    [put] = fake.kube.calls("PUT", "propagationpolicies")
    assert put.body["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    now = fake.kube.get("propagationpolicies", "web", "shop")
    terms = now["spec"]["placement"]["clusterAffinities"]
    assert [t["affinityName"] for t in terms] == [
        GREEN_TERM, "carbonshift-group-1-r1", "carbonshift-group-2-r1"
    ]  # fmt: skip
    record = Record.decode(now["metadata"]["annotations"][DECISION])
    assert record.body["round"] == 1
    assert record.owns("placement.clusterAffinities", terms)
    [event] = fake.events
    assert "failover groups renamed" in event["note"], event["note"]
    assert "dirty -9, green +9" in event["note"], event["note"]


async def test_failover_groups_written_since_the_pass_listed_them_wait(
    karmada: tuple[Karmada, client.ApiClient],
) -> None:
    fake, api = karmada
    planner, config = rebalancer(api)
    stored = fake.kube.add(groups_policy(config))
    fake.seed([cluster("green", 16, used=1), cluster("dirty", 64)], [binding("web", {"dirty": 9})])
    fake.kube.touch("propagationpolicies", "web", "shop")  # someone wrote it since
    assert await planner.rebalance([stored], context(config)) == {"in_flight": 1}
    assert fake.kube.calls("PUT", "propagationpolicies") == []
    assert fake.events == []


async def test_watched_caches_are_read_not_listed_and_a_move_asked_is_in_flight_until_seen(
    karmada: tuple[Karmada, client.ApiClient],
) -> None:
    fake, api = karmada
    fake.seed(
        [cluster("green", 4, used=1), cluster("mid", 8, used=6), cluster("dirty", 64)],
        [binding("a", {"mid": 3})],
    )
    clock = Clock()
    planner = Rebalancer(api, parse({}), kubeapi.Gate(), clock=clock,
                         watched=rebalancer_module.Watched.of())  # fmt: skip
    policies = [fill_policy("a")]
    config = parse({})
    assert planner.watched is not None
    assert await planner.rebalance(policies, context(config)) == {}  # not synced: no pass
    for cache in planner.watched.caches:
        await cache.list_once(api)
    lists = len(fake.kube.calls("GET", BINDINGS))
    assert await planner.rebalance(policies, context(config)) == {"moved": 1}
    # The watch has not delivered the WorkloadRebalancer just created: the workload is in
    # flight all the same, and the pass listed nothing.
    assert await planner.rebalance(policies, context(config)) == {"in_flight": 1}
    assert len(fake.kube.calls("GET", BINDINGS)) == lists
    assert len(fake.rebalancers) == 1
    clock.now += 31  # never delivered: in flight no longer than a claim's grace
    assert await planner.rebalance(policies, context(config)) != {"in_flight": 1}


def test_fills_hold_equal_tiers_once_and_few_names_as_a_tuple() -> None:
    shared = Tiers()
    every = [f"member-{i:02d}" for i in range(40)]
    one = shared.hold([every[:10], every[10:]])
    again = shared.hold([list(every[:10]), list(every[10:])])
    assert again[0] is one[0]  # equal tiers: held once
    assert again[1] is one[1]
    assert isinstance(one[1], Named)  # many names: bits of one numbering
    assert all(name in one[1] for name in every)
    assert "member-40" not in one[1]
    assert 7 not in one[1]  # not a name
    other = shared.hold([every[20:], ["member-99"]])  # numbers one more cluster
    assert "member-99" in other[1]
    assert "member-99" not in one[1]
    assert "member-00" in one[1]
    assert "member-00" not in other[1]
    assert one[1] != other[1]
    assert Tiers().hold([every[:10], every[10:]])[1] == one[1]  # equal names: equal
    small = shared.hold([["a", "b"], ["c", "a"]])
    assert small[1] == ("a", "b", "c")  # a few names: a tuple, each once
    assert "c" in small[1]
    assert "d" not in small[1]
    shared.keep([])  # no fill holds any: all forgotten
    assert len(shared) == 0


def test_policies_with_equal_tiers_hold_them_once() -> None:
    # Every open policy decided on the same readings has the same tiers: the keeper's
    # fills (from an empty shared holder on) hold them, and the names, once.
    shared = Tiers()
    first = Fill.of(fill_policy("web"), shared)
    second = Fill.of(fill_policy("api"), shared)
    assert first is not None
    assert second is not None
    assert first.key != second.key
    assert second.tiers is first.tiers
    assert second.named is first.named
    assert len(shared) == 1


def _weird_binding() -> dict[str, Any]:
    odd = binding("odd", {"green": 1})
    odd["metadata"]["generation"] = "7"  # not the API's type: read as the plain decoder does
    odd["spec"]["resource"] = "not a mapping"
    return odd


@pytest.mark.parametrize(
    "obj",
    [
        binding("web", {"green": 4, "elsewhere": 2}),
        {
            **binding("web", {"green": 1}),
            "metadata": {
                "name": "w",
                "namespace": "shop",
                "labels": {"a": "b"},
                "uid": "u",
                "resourceVersion": "9",
                "generation": 3,
                "managedFields": [{"manager": "x"}],
                "annotations": {"propagationpolicy.karmada.io/name": "web", "other": "dropped"},
            },
            "status": {"conditions": [{"type": "Scheduled"}], "lastScheduledTime": "t"},
        },
        {
            "apiVersion": "work.karmada.io/v1alpha2",
            "kind": "ClusterResourceBinding",
            "metadata": {"name": "c"},
        },
        _weird_binding(),
    ],
    ids=["binding", "extra-fields", "bare", "odd-types"],
)
def test_a_listed_binding_is_held_as_the_plain_decoder_holds_it(obj: dict[str, Any]) -> None:
    data = memoryview(orjson.dumps(obj))
    head = msgspec.json.decode(data, type=Head)
    assert _slim_listed_binding(data, head, None) == _slim_binding(obj, None)
    try:  # the fast path: what the API server sends is read by the schema alone
        _listed_binding().decode(data)
    except msgspec.ValidationError:
        assert obj["metadata"]["name"] == "odd-deployment"
