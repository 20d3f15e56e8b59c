"""The budget oracle: the least emissions within the spatial target's move budget."""

from __future__ import annotations

import random

import pytest

from tests.simulate.grids import MakeGrid, MakeScenario
from webhook.simulate import budget
from webhook.simulate.engine import BUDGET_ORACLE, constrained_and_budget, simulate_spatial
from webhook.simulate.grid import Grid
from webhook.simulate.metrics import Role, moved
from webhook.simulate.scenario import Scenario

ONE = [{"name": "web", "replicas": 1}]
TWO = [{"name": "green", "zone": "G"}, {"name": "dirty", "zone": "D"}]


def test_the_budget_is_a_tenth_of_greedys_moves() -> None:
    assert budget.MOVE_BUDGET_SHARE == 0.10
    assert [budget.move_budget(n) for n in (0, 9, 10, 6351)] == [0, 0, 1, 635]


@pytest.mark.parametrize(
    ("allowed", "grams"),
    [
        # One replica; G is greener in hours 0 and 2, D in 1 and 3. With no move it stays
        # where the four hours cost least (1,200 either way); one move: G then D from hour
        # 1 (100 + 300 + 300 + 300); two moves buy nothing more (G, D, G, G or G, D, D, D);
        # three follow every crossing (100 + 300 + 100 + 300), as the constrained oracle.
        (0, 1200.0),
        (1, 1000.0),
        (2, 1000.0),
        (3, 800.0),
        (None, 800.0),
    ],
)
def test_a_hand_checked_case(
    allowed: int | None, grams: float, make_grid: MakeGrid, make_scenario: MakeScenario
) -> None:
    grid = make_grid({"G": [100.0, 500.0, 100.0, 500.0], "D": [300.0] * 4})
    scenario = make_scenario(4, clusters=TWO, workloads=ONE)
    constrained, run = constrained_and_budget(scenario, grid, allowed)
    assert constrained.total == pytest.approx(800.0)
    assert run.total == pytest.approx(grams)
    assert run.moves <= (3 if allowed is None else allowed)
    assert run.details["optimal"] is True
    assert run.details["lower_bound_kg"] == pytest.approx(grams / 1000)


def test_replicas_that_leave_are_taken_where_the_fleet_shrinks(
    make_grid: MakeGrid, make_scenario: MakeScenario
) -> None:
    # Two replicas scale down to one at hour 1 (daily_low is replaced by two instances:
    # one for the whole run, one for hour 0 only). With no move, the replica that stays
    # is the one on G: the departing one is taken from D, which is no move.
    grid = make_grid({"G": [100.0, 100.0], "D": [300.0, 300.0]})
    clusters = [{**TWO[0], "capacity": {"replicas": 1}}, {**TWO[1], "capacity": {"replicas": 2}}]
    workloads = [{"name": "web", "replicas": 1}, {"name": "job", "replicas": 1, "run_hours": 1}]
    scenario = make_scenario(2, clusters=clusters, workloads=workloads)
    _, run = constrained_and_budget(scenario, grid, 0)
    assert run.total == pytest.approx(100 + 300 + 100)
    assert run.moves == 0


def test_the_oracle_chooses_where_pinned_work_goes(
    make_grid: MakeGrid, make_scenario: MakeScenario
) -> None:
    # One movable replica on G (room 1) and a pinned one-hour job at hour 1. The
    # constrained oracle pins the job on G and moves the replica to D and back for free
    # (100 + 100 + 300 + 100). Without moves, pinned there, the replica would have to sit
    # on D all three hours (1,000); any policy can pin the job on D instead (600, no move),
    # so the budget oracle must too, or it would be no lower bound.
    grid = make_grid({"G": [100.0] * 3, "D": [300.0] * 3})
    # ("clean" sorts before "dirty": the constrained oracle's tie goes to the green one.)
    clusters = [
        {"name": "clean", "zone": "G", "capacity": {"replicas": 1}},
        {**TWO[1], "capacity": {"replicas": 2}},
    ]
    job = {"name": "job", "replicas": 1, "movable": False, "run_hours": 1, "offset_hours": 1}
    scenario = make_scenario(3, clusters=clusters, workloads=[*ONE, job])
    constrained, run = constrained_and_budget(scenario, grid, 0)
    assert constrained.total == pytest.approx(600.0)
    assert run.total == pytest.approx(600.0)
    assert run.moves == 0
    assert run.details["lower_bound_kg"] == pytest.approx(0.6)
    assert [run.daily_share[c][0] for c in ("clean", "dirty")] == [3, 1]


def test_moves_count_as_the_policies_do() -> None:
    assert moved({"a": 3, "b": 1}, {"a": 1, "b": 3}, 0) == 2
    assert moved({"a": 3, "b": 1}, {"a": 1, "b": 1}, removed=2) == 0
    assert moved({"a": 3, "b": 1}, {"a": 1, "b": 2}, removed=1) == 1


def _case(seed: int, make_grid: MakeGrid, make_scenario: MakeScenario) -> tuple[Scenario, Grid]:
    rng = random.Random(seed)
    hours = 72
    zones = ["A", "B", "C", "D"]
    grid = make_grid({z: [rng.uniform(20, 600) for _ in range(hours)] for z in zones})
    clusters = [
        {"name": z.lower(), "zone": z, "capacity": {"share": rng.choice([0.3, 0.5, 1.0])}}
        for z in zones
    ]
    workloads = [
        {"name": "svc", "replicas": rng.randint(3, 12), "daily_low": 0.5},
        {"name": "db", "replicas": rng.randint(1, 5), "movable": False},
        {"name": "job", "replicas": 3, "run_hours": 5, "every_hours": 7},
        {"name": "etl", "replicas": 2, "run_hours": 4, "every_hours": 24, "movable": False},
    ]
    compare = {"top_n": 2, "max_clusters": 2, "forecast_days": 2}
    return make_scenario(hours, clusters=clusters, workloads=workloads, compare=compare), grid


@pytest.mark.parametrize("seed", range(4))
def test_never_beats_the_constrained_oracle_nor_exceeds_its_budget(
    seed: int, make_grid: MakeGrid, make_scenario: MakeScenario
) -> None:
    scenario, grid = _case(seed, make_grid, make_scenario)
    runs = {r.key: r for r in simulate_spatial(scenario, grid)}
    run, oracle = runs[BUDGET_ORACLE], runs["oracle"]
    assert run.role is Role.BUDGET_ORACLE
    greedy = next(r for k, r in runs.items() if k.startswith("greedy-top"))
    assert run.details["greedy_moves"] == greedy.moves
    assert run.details["move_budget"] == budget.move_budget(greedy.moves)
    assert run.moves <= budget.move_budget(greedy.moves)
    assert run.total >= oracle.total - 1e-6
    assert run.total <= runs["baseline"].total + 1e-6  # staying put is within any budget
    # Fewer moves never help; more never hurt.
    totals = [constrained_and_budget(scenario, grid, b)[1].total for b in (0, 5, 20)]
    assert totals == sorted(totals, reverse=True)


@pytest.mark.parametrize("seed", range(3))
def test_an_unlimited_budget_is_the_constrained_oracle(
    seed: int, make_grid: MakeGrid, make_scenario: MakeScenario
) -> None:
    scenario, grid = _case(seed, make_grid, make_scenario)
    oracle, run = constrained_and_budget(scenario, grid, None)
    assert run.total == pytest.approx(oracle.total)
    assert list(run.hourly) == pytest.approx(list(oracle.hourly))
    large, _ = constrained_and_budget(scenario, grid, 10**6)
    assert constrained_and_budget(scenario, grid, 10**6)[1].total == pytest.approx(large.total)


def test_without_scipy_there_is_no_budget_oracle(
    monkeypatch: pytest.MonkeyPatch, make_grid: MakeGrid, make_scenario: MakeScenario
) -> None:
    monkeypatch.setattr(budget, "available", lambda: False)
    grid = make_grid({"G": [100.0, 500.0], "D": [300.0] * 2})
    scenario = make_scenario(2, clusters=TWO, workloads=ONE)
    keys = [r.key for r in simulate_spatial(scenario, grid, policies=[])]
    assert keys == ["oracle-free", "oracle"]


def test_a_schedule_not_proven_best_in_time_gives_way_to_the_bound() -> None:
    # One replica, G greener in hours 0 and 2, two moves allowed: the relaxation moves half
    # a replica back and forth (900), the best whole schedule emits 1,000. Stopped before
    # HiGHS proves one, the relaxation's schedule stands, its emissions the lower bound,
    # so no row's share of it can overstate.
    room = [[1, 1]] * 4
    values = [[100.0, 300.0], [500.0, 300.0], [100.0, 300.0], [500.0, 300.0]]
    work = budget.fleet([(0, [1, 1, 1, 1])], 4)
    best = budget.schedule(room, values, work, 2)
    assert (best.cost, best.optimal) == (1000.0, True)
    stopped = budget.schedule(room, values, work, 2, time_limit=1e-9)
    assert stopped.optimal is False
    assert stopped.cost == pytest.approx(900.0)
    assert stopped.bound == pytest.approx(900.0)
    assert stopped.counts[1] == pytest.approx([0.5, 0.5])
