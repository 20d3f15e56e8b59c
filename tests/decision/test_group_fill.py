"""Karmada's failover over ordered ``clusterAffinities`` groups (before v1.18, v1.16
``scheduleResourceBindingWithClusterAffinities`` and ``assignByDynamicStrategy``), and the
leader's move back by renaming the groups."""

from __future__ import annotations

from webhook.decision.karmada.capacity import (
    assess_move,
    group_fill,
    groups_of,
    plan_move,
    regroup,
)
from webhook.model.config import RebalanceConfig

TIERS = [["green"], ["mid"], ["dirty"]]
INTENSITY = {"green": 50.0, "mid": 300.0, "dirty": 700.0}
RULE = RebalanceConfig()


def test_group_k_holds_tiers_0_to_k() -> None:
    assert groups_of(TIERS) == [["green"], ["green", "mid"], ["green", "mid", "dirty"]]
    assert groups_of([["a", "b"], ["b", "c"]]) == [["a", "b"], ["a", "b", "c"]]


def test_the_first_group_with_room_for_every_replica_takes_them_by_room() -> None:
    # the fleet: 10 one-CPU replicas, room 4 / 8 / 64 (tests/e2e on v1.16.0: 3 / 7)
    room = {"green": 4, "mid": 8, "dirty": 64}
    assert group_fill(10, TIERS, room) == ({"green": 3, "mid": 7}, 1)
    assert group_fill(4, TIERS, room) == ({"green": 4}, 0)
    assert group_fill(80, TIERS, room) is None  # no group holds them: unschedulable


def test_steady_mode_keeps_the_term_it_observed_and_never_goes_back() -> None:
    room = {"green": 10, "mid": 10, "dirty": 10}
    before = {"green": 1, "mid": 4}
    # scaled up from the observed group 1: the replicas there stay, the rest by room
    got, term = group_fill(8, TIERS, room, before, start=1) or ({}, -1)
    assert term == 1
    assert got["green"] >= 1
    assert got["mid"] >= 4
    assert sum(got.values()) == 8
    assert "dirty" not in got
    # room for all in group 0 now, but Karmada starts at the observed group
    assert group_fill(5, TIERS, room, before, start=1) == (before, 1)
    # a start that names no term starts at 0
    assert group_fill(5, TIERS, room, {}, start=7) == ({"green": 5}, 0)


def test_a_scale_down_shrinks_every_previous_cluster_in_proportion() -> None:
    before = {"green": 4, "mid": 4, "dirty": 2}
    got, term = group_fill(5, TIERS, {}, before, start=2) or ({}, -1)
    assert term == 2
    assert sum(got.values()) == 5
    assert got.get("dirty", 0) >= 1  # unlike overflow tiers, the dirtiest is not emptied first


def test_fresh_mode_divides_the_whole_by_room_and_replicas_there() -> None:
    room = {"green": 2, "mid": 0, "dirty": 10}
    before = {"green": 2, "mid": 6}
    # 8 by (room + replicas there) 4 : 6, dirty not in the observed group
    assert group_fill(8, TIERS, room, before, start=1, fresh=True) == ({"green": 3, "mid": 5}, 1)
    assert group_fill(11, TIERS, room, before, start=1, fresh=True) is not None  # group 2
    assert group_fill(11, [["green"], ["mid"]], room, before, start=1, fresh=True) is None


def test_renamed_groups_refill_from_the_greenest_keeping_green_replicas() -> None:
    before = {"green": 2, "mid": 3, "dirty": 5}
    room = {"green": 8, "mid": 5, "dirty": 0}
    assert regroup(10, TIERS, room, before) == {"green": 10}
    # group 0 cannot take the 8 outside it; group 1 takes the 5 outside it by room 3 : 5
    assert regroup(10, TIERS, {"green": 3, "mid": 5}, before) == {"green": 4, "mid": 6}
    assert regroup(30, TIERS, {}, before) is None


def test_the_move_back_of_groups_is_planned_as_a_renaming() -> None:
    before = {"green": 2, "dirty": 8}
    room = {"green": 8, "mid": 0, "dirty": 0}
    move = plan_move(before, TIERS, room, INTENSITY, RULE, budget=50, groups=True)
    assert move is not None
    assert move.target == {"green": 10}
    assert move.moved == 8
    # no group can take them: no room; all in the greenest: nothing to do
    assert assess_move(before, TIERS, {}, INTENSITY, RULE, budget=50, groups=True) == (
        None,
        "no_room",
    )
    assert assess_move({"green": 5}, TIERS, {}, INTENSITY, RULE, budget=50, groups=True) == (
        None,
        None,
    )
