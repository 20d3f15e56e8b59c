"""Capacity matters: carbonshift's default placement for a Divided policy is the ordered
fill (the greenest member first, the others as ``overflowAffinities`` in carbon order,
divided by available replicas), and the real karmada-scheduler fills it by the room the
members report. The sandbox's members differ in size (``MEMBER_CPUS``: member-se holds
four one-CPU replicas, member-fr eight, member-pl 64).

- a plain Divided policy of ten one-CPU replicas: four on member-se, six on member-fr, none
  on member-pl, no Pod Pending on any member;
- scaling up fills in carbon order, scaling down empties the dirtiest member first;
- room returning on the greenest member: the leader (a ``carbonshift serve`` replica with
  re-evaluation every second) moves the replicas back with a WorkloadRebalancer and a
  ``CarbonReplicasMoved`` Event, once, and not while there is no room;
- twenty such policies created at once never put more on member-se than it holds (the
  CarbonAware plugin's settling replica estimator, ``--carbonshift-settle``, counts the
  scheduler's own assignments until the member's resource summary shows them;
  ``SchedulingOvercommitProtection`` alone let 6 and 8 through);
- with carbonshift stopped, a new policy and Deployment still propagate (the webhook's
  ``failurePolicy: Ignore``, the plugin failing open).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e_support import (
    BINDINGS,
    DEMO,
    PASSES,
    Kube,
    carbonshift_marks,
    deployment,
    eventually,
    more_passes,
    no_binding_terminating,
    print_bindings,
    propagation_policy,
    unique,
    wait_rooms,
)
from test_fleet_labels import holder
from test_members import landed
from test_reevaluate_policies import Grid, events, follower, metric
from test_schedulers import carbonshift_stopped

from devtools.sandbox import Sandbox
from devtools.sandbox.objects import MEMBER_CPUS
from webhook.decision.karmada.terms import fill_tiers

pytestmark = pytest.mark.timeout(600)

GREENEST, MIDDLE, DIRTIEST = DEMO
CPU = "1"
FULL = {m: int(MEMBER_CPUS[m]) for m in DEMO}
"""One-CPU replicas each member holds when nothing else runs there."""
REBALANCERS = "workloadrebalancers.apps.karmada.io"
FILL = {
    "replicaSchedulingType": "Divided",
    "replicaDivisionPreference": "Weighted",
    "weightPreference": {"dynamicWeight": "AvailableReplicas"},
}


def pending(kube: Kube, namespace: str) -> dict[str, list[str]]:
    """Member -> its Pods in ``namespace`` that are not Running."""
    out = {}
    for member in DEMO:
        listed = json.loads(kube.on(member).ok("get", "pods", "-n", namespace, "-o", "json"))
        waiting = [
            p["metadata"]["name"]
            for p in listed["items"]
            if (p.get("status") or {}).get("phase") != "Running"
        ]
        if waiting:
            out[member] = waiting
    return out


def binding(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    """The Deployment's ResourceBinding ({} while there is none)."""
    result = kube.run("get", BINDINGS, f"{name}-deployment", "-n", namespace, "-o", "json")
    found: dict[str, Any] = json.loads(result.stdout) if result.returncode == 0 else {}
    return found


def scheduled(kube: Kube, namespace: str, name: str) -> dict[str, int]:
    """The ResourceBinding's ``spec.clusters``."""
    clusters = binding(kube, namespace, name).get("spec", {}).get("clusters") or []
    return {c["name"]: c["replicas"] for c in clusters}


def healthy(found: Mapping[str, Any]) -> set[str]:
    """The members a binding's ``status.aggregatedStatus`` reports Healthy: karmada-scheduler
    counts the replicas it assigned to a member as taking room there (its overcommit
    protection) until then, whatever the Cluster's resource summary already says."""
    items = (found.get("status") or {}).get("aggregatedStatus") or []
    return {i["clusterName"] for i in items if i.get("health") == "Healthy"}


def running(kube: Kube, namespace: str, name: str) -> dict[str, int]:
    """Member -> ready replicas of the Deployment in that member's own API server."""
    found = {}
    for member in DEMO:
        obj = kube.on(member).find("deployment", name, namespace) or {}
        ready = (obj.get("status") or {}).get("readyReplicas") or 0
        if ready and (obj.get("spec") or {}).get("replicas"):
            found[member] = ready
    return found


def settles(kube: Kube, namespace: str, name: str, want: Mapping[str, int]) -> None:
    """Until Karmada scheduled ``want``, the members run exactly that and Karmada reports
    it Healthy on each (so its scheduler no longer counts those replicas as arriving);
    no Pod Pending."""
    seen: list[Any] = []

    def there() -> bool | None:
        found = binding(kube, namespace, name)
        clusters = (found.get("spec") or {}).get("clusters") or []
        placed = {c["name"]: c["replicas"] for c in clusters}
        now = (placed, running(kube, namespace, name))
        well = healthy(found)
        seen[:] = [(*now, sorted(well))]
        return True if now == (dict(want), dict(want)) and set(want) <= well else None

    try:
        eventually(there, f"{namespace}/{name} at {dict(want)}", timeout=120.0)
    except BaseException:
        print(f"(binding, running) now: {seen}")
        print_bindings(kube)
        raise
    assert pending(kube, namespace) == {}


def fill_policy(kube: Kube, name: str, namespace: str) -> dict[str, Any]:
    """Apply a plain Divided policy for Deployment ``name``; the ordered fill is stored."""
    policy = kube.apply_json(propagation_policy(name, namespace))
    placement = policy["spec"]["placement"]
    assert fill_tiers(placement) == [[GREENEST], [MIDDLE], [DIRTIEST]], placement
    assert placement["replicaScheduling"] == FILL, placement
    return policy


@pytest.fixture
def namespace(kube: Kube) -> Iterator[str]:
    """An opted-in namespace, on members that run nothing asking for CPU (deleted after)."""
    no_binding_terminating(kube)
    wait_rooms(kube, FULL)
    name = kube.namespace(enabled=True)
    try:
        yield name
    finally:
        kube.run("delete", "namespace", name, "--wait=false")


def test_a_plain_divided_policy_fills_the_greenest_member_up_to_its_room_and_scales_in_carbon_order(
    kube: Kube, namespace: str
) -> None:
    """One workload from a quiet fleet to the end: karmada-scheduler's estimate of a
    member's room right after another test's replicas left it can still count them
    (seen as 0 on member-se, 2 on member-fr just after 4 + 6 had left), so the scaling
    steps start from this test's own placement rather than from a second workload's."""
    name = unique("fill")
    fill_policy(kube, name, namespace)
    kube.apply(deployment(name, namespace, replicas=10, cpu=CPU))
    settles(kube, namespace, name, {GREENEST: 4, MIDDLE: 6})
    assert kube.on(DIRTIEST).find("deployment", name, namespace) is None
    steps = [
        (14, {GREENEST: 4, MIDDLE: 8, DIRTIEST: 2}),  # member-fr full: the rest to PL
        (11, {GREENEST: 4, MIDDLE: 7}),  # PL empties first
        (3, {GREENEST: 3}),
    ]
    now = {GREENEST: 4, MIDDLE: 6}
    for replicas, want in steps:
        # Karmada's estimate follows the members' resource summaries (every 10 s): scaling
        # before they count the running replicas would overfill member-se.
        wait_rooms(kube, {m: FULL[m] - now.get(m, 0) for m in DEMO})
        kube.ok("scale", "deployment", name, "-n", namespace, f"--replicas={replicas}")
        settles(kube, namespace, name, want)
        now = want


@pytest.fixture
def grid() -> Iterator[Grid]:
    with Grid() as running_grid:
        yield running_grid


def blocker(kube: Kube, cpus: int) -> str:
    """``cpus`` one-CPU replicas on the greenest member, in a namespace carbonshift does not
    manage; returns the namespace."""
    namespace = kube.namespace(enabled=False)
    placement = {"clusterAffinity": {"clusterNames": [GREENEST]}}
    kube.apply(propagation_policy("blocker", namespace, placement=placement))
    kube.apply(deployment("blocker", namespace, replicas=cpus, cpu=CPU))
    settles(kube, namespace, "blocker", {GREENEST: cpus})
    return namespace


def test_the_leader_moves_replicas_back_once_the_greenest_member_has_room(
    sandbox: Sandbox, kube: Kube, namespace: str, tmp_path: Path, grid: Grid
) -> None:
    blocked = blocker(kube, FULL[GREENEST] - 1)
    try:
        wait_rooms(kube, {GREENEST: 1})
        name = unique("back")
        fill_policy(kube, name, namespace)
        kube.apply(deployment(name, namespace, replicas=10, cpu=CPU))
        settles(kube, namespace, name, {GREENEST: 1, MIDDLE: 8, DIRTIEST: 1})
        with follower(sandbox, tmp_path, grid) as leader:
            eventually(lambda: holder(kube, leader.name), "leadership", timeout=30.0)
            # No room on the greenest member: nothing moves.
            eventually(
                lambda: metric(leader, "carbonshift_rebalances_total", outcome="no_room") or None,
                "a pass that found no room",
            )
            assert metric(leader, "carbonshift_replicas_moved_total") == 0
            kube.ok("delete", "namespace", blocked, "--wait=false")
            settles(kube, namespace, name, {GREENEST: 4, MIDDLE: 6})
            moved = events(kube, namespace, name, "CarbonReplicasMoved")
            assert len(moved) == 1, moved
            note = moved[0]["note"]
            assert f"{GREENEST} +3" in note, note
            assert f"{DIRTIEST} -1" in note, note
            assert "expected intensity" in note, note
            assert "expected saving" in note, note
            assert metric(leader, "carbonshift_replicas_moved_total") == 3
            selector = "app.kubernetes.io/managed-by=carbonshift"
            mine = json.loads(kube.ok("get", REBALANCERS, "-l", selector, "-o", "json"))["items"]
            ours = [r for r in mine
                    if any(w["name"] == name for w in r["spec"]["workloads"])]  # fmt: skip
            assert len(ours) == 1, ours
            assert ours[0]["spec"]["ttlSecondsAfterFinished"] == 600
            assert ours[0]["spec"]["workloads"] == [
                {"apiVersion": "apps/v1", "kind": "Deployment", "name": name,
                 "namespace": namespace}
            ]  # fmt: skip
            # more passes: the replicas are where they belong, nothing moves
            more_passes(lambda: leader.metric(PASSES), 5)
            assert metric(leader, "carbonshift_replicas_moved_total") == 3
            assert scheduled(kube, namespace, name) == {GREENEST: 4, MIDDLE: 6}
    finally:
        kube.run("delete", "namespace", blocked, "--wait=false")


def test_room_returning_is_acted_on_at_once_not_on_the_interval(
    sandbox: Sandbox, kube: Kube, namespace: str, tmp_path: Path, grid: Grid
) -> None:
    # The leader looks at everything again only hourly here: what moves the replicas back
    # is the greenest member's room changing (its Cluster's resource summary).
    hourly = {"reevaluate": {"interval_seconds": 3600, "min_interval_seconds": 1,
                             "forecast": "day-ahead-profile"}}  # fmt: skip
    blocked = blocker(kube, FULL[GREENEST] - 1)
    try:
        wait_rooms(kube, {GREENEST: 1})
        name = unique("room")
        fill_policy(kube, name, namespace)
        kube.apply(deployment(name, namespace, replicas=10, cpu=CPU))
        settles(kube, namespace, name, {GREENEST: 1, MIDDLE: 8, DIRTIEST: 1})
        with follower(sandbox, tmp_path, grid, extra=hourly) as leader:
            eventually(lambda: holder(kube, leader.name), "leadership", timeout=30.0)
            eventually(
                lambda: metric(leader, "carbonshift_rebalances_total", outcome="no_room") or None,
                "the term's first pass, which found no room",
            )
            kube.ok("delete", "namespace", blocked, "--wait=false")
            wait_rooms(kube, {GREENEST: 3}, at_least=True)
            roomy = time.monotonic()
            eventually(
                lambda: metric(leader, "carbonshift_replicas_moved_total") or None,
                "a move once the room returned",
                timeout=60.0,
            )
            reaction = time.monotonic() - roomy
            settles(kube, namespace, name, {GREENEST: 4, MIDDLE: 6})
            assert metric(leader, "carbonshift_replicas_moved_total") == 3
            print(f"\nroom returned -> move asked in {reaction:.1f} s (interval 3600 s)")
    finally:
        kube.run("delete", "namespace", blocked, "--wait=false")


def test_many_policies_at_once_do_not_overfill_the_greenest_member(
    kube: Kube, namespace: str
) -> None:
    names = [unique("crowd") for _ in range(20)]
    documents = [propagation_policy(n, namespace) for n in names]
    documents += [deployment(n, namespace, replicas=2, cpu=CPU) for n in names]
    kube.ok("apply", "-f", "-", stdin=yaml.safe_dump_all(documents))
    peak = 0

    def placed() -> dict[str, int] | None:
        nonlocal peak
        totals = dict.fromkeys(DEMO, 0)
        for n in names:
            for member, replicas in scheduled(kube, namespace, n).items():
                totals[member] = totals.get(member, 0) + replicas
        peak = max(peak, totals[GREENEST])
        return totals if sum(totals.values()) == 2 * len(names) else None

    totals = eventually(placed, "every binding scheduled", timeout=120.0)
    print(f"replicas per member {totals}, most ever on {GREENEST}: {peak}")
    assert peak <= FULL[GREENEST], (peak, totals)
    assert totals[DIRTIEST] > 0  # the crowd overflowed in carbon order
    eventually(  # every member runs what Karmada put there
        lambda: (
            all(running(kube, namespace, n) == scheduled(kube, namespace, n) for n in names) or None
        ),
        "every Deployment running on the members",
        timeout=120.0,
    )
    assert pending(kube, namespace) == {}


def test_scheduling_still_works_with_carbonshift_stopped(
    sandbox: Sandbox, kube: Kube, namespace: str
) -> None:
    name = unique("down")
    with carbonshift_stopped(sandbox):
        policy = kube.apply_json(propagation_policy(name, namespace))
        assert carbonshift_marks(policy) == {}  # admitted unmutated (failurePolicy Ignore)
        kube.apply(deployment(name, namespace, replicas=4))
        got = landed(kube, namespace, name)  # the plugin fails open
        assert sum(got.values()) == 4, got
    assert pending(kube, namespace) == {}
