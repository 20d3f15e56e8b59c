"""carbonshift's rows run the product: its config defaults and its rules move the figures."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
import pytest

from tests.simulate.grids import MakeGrid, MakeScenario
from webhook.decision.forecast import DAYS, RANK_HOURS
from webhook.decision.karmada import placement
from webhook.kinds.reevaluation import METHODS, replayed
from webhook.model.config import Config, HysteresisConfig, ReevaluateConfig, overlay
from webhook.simulate.engine import simulate_spatial
from webhook.simulate.policies import spatial_policies
from webhook.simulate.scenario import Compare, Scenario

CLUSTERS = [
    {"name": "a", "zone": "A", "capacity": {"replicas": 4}},
    {"name": "b", "zone": "B", "capacity": {"replicas": 4}},
    {"name": "c", "zone": "C"},
]


def test_the_settings_default_to_the_products_config(make_scenario: MakeScenario) -> None:
    config = Config()
    scenario = make_scenario(1, batch=[{"name": "p", "zone": "Z"}])
    assert scenario.policy == config
    compare = scenario.compare
    assert compare == Compare()
    assert compare.forecast == replayed(METHODS[config.reevaluate.forecast])
    assert (compare.forecast_hours, compare.forecast_days) == (RANK_HOURS, DAYS)


def _flipping(make_grid: MakeGrid, make_scenario: MakeScenario) -> tuple[Scenario, object]:
    # A and B swap every 6 hours, C is always dirtiest; 6 movable replicas.
    hours = 72
    a = [100.0 if (h // 6) % 2 == 0 else 300.0 for h in range(hours)]
    b = [300.0 if (h // 6) % 2 == 0 else 100.0 for h in range(hours)]
    grid = make_grid({"A": a, "B": b, "C": [600.0] * hours})
    scenario = make_scenario(
        hours, clusters=CLUSTERS, workloads=[{"name": "w", "replicas": 6, "movable": True}]
    )
    return scenario, grid


def _fill(scenario: Scenario, grid: object) -> tuple[float, int]:
    names: Sequence[str] = [c.name for c in scenario.clusters]
    zones = {c.name: c.zone for c in scenario.clusters}
    lineup = spatial_policies(scenario.policy, scenario.compare, names, zones)
    row = next(p for p in lineup if p.key == "fill")
    runs = {r.key: r for r in simulate_spatial(scenario, grid, [lineup[0], row])}  # type: ignore[arg-type]
    return runs["fill"].total, runs["fill"].moves


def test_a_config_default_moves_the_figures(
    make_grid: MakeGrid, make_scenario: MakeScenario
) -> None:
    scenario, grid = _flipping(make_grid, make_scenario)
    default = _fill(scenario, grid)
    # At most one write per object a day: the leader's re-evaluation holds on.
    rare = _with_policy(scenario, {"reevaluate": {"min_interval_seconds": 86400}})
    assert rare.policy == Config(reevaluate=ReevaluateConfig(min_interval_seconds=86400.0))
    assert _fill(rare, grid)[0] > default[0]
    longer = _with_policy(scenario, {"hysteresis": {"dwell_hours": 48}})
    assert longer.policy == Config(hysteresis=HysteresisConfig(dwell_hours=48.0))
    held = _fill(longer, grid)
    assert held[0] > default[0]  # dwelling through every flip emits more


def _with_policy(scenario: Scenario, partial: Mapping[str, Any]) -> Scenario:
    """``scenario`` whose ``policy:`` is ``partial``."""
    return msgspec.structs.replace(scenario, policy=overlay(Config(), partial))


def test_a_product_rule_moves_the_figures(
    make_grid: MakeGrid, make_scenario: MakeScenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario, grid = _flipping(make_grid, make_scenario)
    before = _fill(scenario, grid)
    order = placement.fill_order
    monkeypatch.setattr(
        placement, "fill_order", lambda values, first=None: order(values, first)[::-1]
    )
    after = _fill(scenario, grid)
    assert after[0] > before[0]  # the dirtiest tier first
