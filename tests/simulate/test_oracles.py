"""The two spatial oracles: the free one (upper bound) and the constrained one (target)."""

from __future__ import annotations

import random

import pytest

from tests.simulate.grids import MakeGrid, MakeScenario
from webhook.simulate.engine import simulate_batch, simulate_spatial
from webhook.simulate.metrics import Role, compare

TWO = [{"name": "green", "zone": "G"}, {"name": "dirty", "zone": "D"}]


def _by_key(runs: list) -> dict:  # type: ignore[type-arg]
    return {r.key: r for r in runs}


def test_the_constrained_oracle_leaves_immovable_work_where_it_was_created(
    make_grid: MakeGrid, make_scenario: MakeScenario
) -> None:
    # G is greener for three hours of four; one pinned replica must pick one cluster.
    grid = make_grid({"G": [100.0, 100.0, 100.0, 500.0], "D": [300.0] * 4})
    scenario = make_scenario(
        4, clusters=TWO, workloads=[{"name": "db", "replicas": 1, "movable": False}]
    )
    runs = _by_key(simulate_spatial(scenario, grid, policies=[]))
    assert runs["oracle"].role is Role.ORACLE
    assert runs["oracle"].total == pytest.approx(100 + 100 + 100 + 500)  # stays on G
    assert runs["oracle-free"].total == pytest.approx(100 + 100 + 100 + 300)  # moves at 3
    assert runs["oracle"].daily_share["green"][0] == 4
    assert runs["oracle"].daily_share["dirty"][0] == 0


def test_the_constrained_oracle_respects_capacity_around_pinned_replicas(
    make_grid: MakeGrid, make_scenario: MakeScenario
) -> None:
    # G holds 2, D holds 3; two pinned replicas and two movable ones. In hour 1 G is the
    # dirtier: the fill puts three replicas on D and one on G. So pinning both on G costs
    # 100 more in hour 1 than one on G and one on D, which costs nothing extra anywhere.
    grid = make_grid({"G": [100.0, 400.0, 100.0], "D": [300.0] * 3})
    clusters = [
        {**TWO[0], "capacity": {"replicas": 2}},
        {**TWO[1], "capacity": {"replicas": 3}},
    ]
    workloads = [
        {"name": "db", "replicas": 2, "movable": False},
        {"name": "web", "replicas": 2},
    ]
    scenario = make_scenario(3, clusters=clusters, workloads=workloads)
    runs = _by_key(simulate_spatial(scenario, grid, policies=[]))
    oracle = runs["oracle"]
    assert oracle.total == pytest.approx(800 + (400 + 3 * 300) + 800)
    assert runs["oracle-free"].total == pytest.approx(oracle.total)
    assert oracle.daily_share["green"][0] == 2 + 1 + 2  # never more than G's 2 replicas
    assert oracle.daily_share["dirty"][0] == 2 + 3 + 2


def test_pinned_replicas_never_exceed_a_cluster_they_fill(
    make_grid: MakeGrid, make_scenario: MakeScenario
) -> None:
    # Three pinned replicas want G, which holds two: the third goes to D for all its life.
    grid = make_grid({"G": [100.0] * 5, "D": [300.0] * 5})
    clusters = [
        {**TWO[0], "capacity": {"replicas": 2}},
        {**TWO[1], "capacity": {"replicas": 3}},
    ]
    workloads = [{"name": "db", "replicas": 3, "movable": False}]
    scenario = make_scenario(5, clusters=clusters, workloads=workloads)
    oracle = _by_key(simulate_spatial(scenario, grid, policies=[]))["oracle"]
    assert oracle.daily_share["green"][0] == 2 * 5
    assert oracle.total == pytest.approx(5 * (2 * 100 + 300))


def _case(seed: int, make_grid: MakeGrid, make_scenario: MakeScenario, pinned: bool) -> tuple:  # type: ignore[type-arg]
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
        {"name": "db", "replicas": rng.randint(1, 5), "movable": not pinned},
        {"name": "job", "replicas": 3, "run_hours": 5, "every_hours": 7, "movable": not pinned},
    ]
    compare = {"top_n": 2, "max_clusters": 2, "forecast_days": 2}
    return make_scenario(hours, clusters=clusters, workloads=workloads, compare=compare), grid


@pytest.mark.parametrize("seed", range(4))
def test_the_oracles_bracket_every_allowed_policy(
    seed: int, make_grid: MakeGrid, make_scenario: MakeScenario
) -> None:
    """free ≤ constrained ≤ every policy (the baseline included): every policy keeps the
    constraints, so its saving, and the baseline's zero, never exceed the target's, and
    the target's share of the upper bound is at most 100 %."""
    scenario, grid = _case(seed, make_grid, make_scenario, pinned=True)
    runs = simulate_spatial(scenario, grid)
    rows = {r.key: r for r in compare(runs, scenario.hours)}
    free, oracle = rows["oracle-free"], rows["oracle"]
    assert free.total_kg <= oracle.total_kg + 1e-9
    assert oracle.saved_pct >= 0.0
    assert oracle.captured_free_pct is None or oracle.captured_free_pct <= 100.0 + 1e-9
    for row in rows.values():
        if row.role == "free-oracle":
            continue
        assert row.total_kg >= oracle.total_kg - 1e-9, row.key
        assert row.captured_pct is None or row.captured_pct <= 100.0 + 1e-9, row.key


@pytest.mark.parametrize("seed", range(3))
def test_with_nothing_pinned_the_two_oracles_agree(
    seed: int, make_grid: MakeGrid, make_scenario: MakeScenario
) -> None:
    scenario, grid = _case(seed, make_grid, make_scenario, pinned=False)
    runs = _by_key(simulate_spatial(scenario, grid, policies=[]))
    assert runs["oracle"].total == pytest.approx(runs["oracle-free"].total)


def test_the_free_batch_oracle_splits_a_job_the_constrained_one_keeps_whole(
    make_grid: MakeGrid, make_scenario: MakeScenario
) -> None:
    # One 2 h job with 2 h of slack: its window is hours 0 to 3. Whole, it costs at best
    # 400 (start at 2); split, its two greenest hours (0 and 3) cost 200.
    grid = make_grid({"Z": [100.0, 400.0, 300.0, 100.0, 900.0, 900.0]})
    batch = [{"name": "p", "zone": "Z", "length_hours": 2, "slack_hours": 2, "every_hours": 9}]
    scenario = make_scenario(6, batch=batch)
    runs = _by_key(simulate_batch(scenario, grid, policies=[]))
    assert runs["oracle"].total == pytest.approx(400.0)  # start at 2: 300 + 100
    assert runs["oracle-free"].total == pytest.approx(200.0)  # hours 0 and 3
    assert runs["oracle"].misses == 0
