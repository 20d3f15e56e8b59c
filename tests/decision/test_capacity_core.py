"""Karmada's tier fill, its general estimator and the move-back rule (decision core)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.decision.karmada.capacity import MoveRule, plan_move, room, tier_fill
from webhook.decision.quantity import quantity
from webhook.model.config import RebalanceConfig, parse

# --- tier fill: the cases of Karmada's own common_test.go, and its rules ---------------------


def test_the_primary_tier_takes_its_room_and_the_rest_overflows() -> None:
    # "primary group capacity exhausted": cap 2 + cap 10, 5 replicas -> 2 + 3
    assert tier_fill(5, [["c1"], ["c2"]], {"c1": 2, "c2": 10}) == {"c1": 2, "c2": 3}


def test_replicas_already_there_count_as_room_of_their_tier() -> None:
    # "AvailableReplicas greater than AllocatableReplicas": c1 had 3, allocatable 2, N=8
    got = tier_fill(8, [["c1"], ["c2"]], {"c1": 2, "c2": 10}, {"c1": 3})
    assert got == {"c1": 5, "c2": 3}


def test_too_little_room_everywhere_is_unschedulable() -> None:
    assert tier_fill(13, [["c1"], ["c2"]], {"c1": 2, "c2": 10}) is None


def test_scale_down_empties_the_dirtiest_tier_first() -> None:
    before = {"green": 4, "mid": 4, "dirty": 2}
    got = tier_fill(7, [["green"], ["mid"], ["dirty"]], {}, before)
    assert got == {"green": 4, "mid": 3}


def test_any_reschedule_refills_the_greenest_tier_once_room_returns() -> None:
    before = {"green": 2, "mid": 3}
    # room came back on green: the next reschedule (any mode) refills tier 0 first
    steady = tier_fill(5, [["green"], ["mid"]], {"green": 10, "mid": 10}, before)
    assert steady == {"green": 5}  # tier 0's target is min(5, 2 + 10): the rescheduling refills it
    fresh = tier_fill(5, [["green"], ["mid"]], {"green": 10, "mid": 10}, before, fresh=True)
    assert fresh == {"green": 5}


def test_inside_a_tier_replicas_follow_the_room() -> None:
    got = tier_fill(6, [["a", "b"]], {"a": 4, "b": 2})
    assert got == {"a": 4, "b": 2}


def test_a_cluster_in_two_tiers_belongs_to_the_first() -> None:
    got = tier_fill(3, [["a"], ["a", "b"]], {"a": 1, "b": 5})
    assert got == {"a": 1, "b": 2}


tier_lists = st.lists(st.integers(0, 8), min_size=1, max_size=5)


@settings(max_examples=300, deadline=None)
@given(tier_lists, st.integers(0, 30), st.lists(st.integers(0, 5), min_size=5, max_size=5))
def test_never_a_dirtier_tier_while_a_greener_has_room(
    rooms: list[int], replicas: int, held: list[int]
) -> None:
    names = [f"c{i}" for i in range(len(rooms))]
    free = dict(zip(names, rooms, strict=True))
    previous = {n: h for n, h in zip(names, held, strict=False) if h}
    for fresh in (False, True):
        got = tier_fill(replicas, [[n] for n in names], free, previous, fresh=fresh)
        cap = {n: free[n] + previous.get(n, 0) for n in names}
        if sum(cap.values()) < replicas:
            assert got is None
            continue
        assert got is not None
        assert sum(got.values()) == replicas
        for i, n in enumerate(names):
            assert got.get(n, 0) <= cap[n]
            if any(got.get(m, 0) for m in names[i + 1 :]):
                assert got.get(n, 0) == cap[n], (got, cap)  # full before the next is used


# --- room: Karmada's general estimator --------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [("500m", "0.5"), ("2", "2"), ("1Gi", str(2**30)), ("1e3", "1000"), ("1.5k", "1500")],
)
def test_quantities(text: str, value: str) -> None:
    assert quantity(text) == Decimal(value)


@pytest.mark.parametrize("text", ["", "abc", "1Xi", None, True, "--1"])
def test_malformed_quantities(text: object) -> None:
    assert quantity(text) is None


SUMMARY = {
    "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
    "allocated": {"cpu": "3500m", "memory": "4Gi", "pods": "10"},
    "allocating": {"cpu": "500m", "pods": "2"},
}


def test_room_is_the_tightest_resource() -> None:
    assert room(SUMMARY, {"cpu": "1"}) == 4
    assert room(SUMMARY, {"cpu": "250m", "memory": "8Gi"}) == 3
    assert room(SUMMARY, None) == 98  # pods only


def test_a_resource_the_cluster_lacks_leaves_no_room() -> None:
    assert room(SUMMARY, {"nvidia.com/gpu": "1"}) == 0


def test_no_summary_means_room_unknown() -> None:
    assert room(None, {"cpu": "1"}) is None
    assert room({"allocatable": {}}, {"cpu": "1"}) is None


# --- moving back ---------------------------------------------------------------------------------

TIERS = [["se"], ["fr"], ["pl"]]
GRID = {"se": 20.0, "fr": 60.0, "pl": 700.0}


def test_a_move_back_is_planned_when_greener_room_returns() -> None:
    move = plan_move(
        {"se": 4, "pl": 6}, TIERS, {"se": 6, "fr": 0, "pl": 0}, GRID, MoveRule(), budget=50
    )
    assert move is not None
    assert move.target == {"se": 10}
    assert move.moved == 6
    assert move.describe({"se": 4, "pl": 6}) == "pl -6, se +6"
    # 6 replicas x 680 g/kWh x 24 h, less one hour at SE each, x 100 W
    assert move.saving_grams == pytest.approx((6 * 680 * 24 - 6 * 20) * 0.1)


def test_no_move_when_the_saving_does_not_beat_the_cost() -> None:
    close = {"se": 58.0, "fr": 60.0, "pl": 700.0}
    rule = MoveRule(move_cost_hours=24.0)
    assert plan_move({"se": 4, "fr": 6}, TIERS, {"se": 6}, close, rule, budget=50) is None


def test_no_move_over_the_budget_or_without_room() -> None:
    current = {"se": 4, "pl": 6}
    assert plan_move(current, TIERS, {"se": 6}, GRID, MoveRule(), budget=5) is None
    rule = MoveRule(max_moves_per_policy=3)
    assert plan_move(current, TIERS, {"se": 6}, GRID, rule, budget=50) is None
    assert plan_move(current, TIERS, {}, GRID, MoveRule(), budget=50) is None


def test_the_rule_is_the_config_section() -> None:
    rule = parse({"rebalance": {"margin": 0.5, "max_moves_per_policy": 7}}).rebalance
    assert isinstance(rule, MoveRule)
    assert (rule.margin, rule.max_moves_per_policy) == (0.5, 7)
    assert MoveRule() == RebalanceConfig()
