"""One complete simulation of a scenario: both engines, the comparison rows and timing."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import TypeVar

from webhook.decision.forecast import offered
from webhook.simulate.batch import PausePolicy, batch_policies
from webhook.simulate.engine import simulate_batch, simulate_spatial
from webhook.simulate.grid import Grid
from webhook.simulate.metrics import Row, Run, compare
from webhook.simulate.multikueue import KEYS as MULTIKUEUE_KEYS
from webhook.simulate.multikueue import simulate_multikueue
from webhook.simulate.policies import SpatialPolicy, spatial_policies
from webhook.simulate.progress import Progress
from webhook.simulate.ranking import Ranking, judge_each
from webhook.simulate.scenario import Scenario


@dataclasses.dataclass(frozen=True, slots=True)
class Part:
    """The spatial or the temporal half of an outcome."""

    runs: list[Run]
    rows: list[Row]


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    """Everything a report needs about one simulated scenario."""

    scenario: Scenario
    grid: Grid
    spatial: Part | None
    temporal: Part | None
    seconds: float
    """Wall time of the simulation proper (traces already loaded)."""
    ranking: list[Ranking] = dataclasses.field(default_factory=list)
    """Batch scenarios: how each forecast ranks the starts of the pools' decision windows,
    the scenario's forecast first (:mod:`webhook.simulate.ranking`)."""
    multikueue: Part | None = None
    """Batch across clusters (Kueue MultiKueue, :mod:`webhook.simulate.multikueue`)."""


def simulate(
    scenario: Scenario,
    grid: Grid,
    *,
    progress: bool = False,
    only: Sequence[str] = (),
) -> Outcome:
    """Run the policies of ``scenario`` on ``grid``.

    ``only`` keeps just those policy keys (the baseline and the oracle always run: every
    comparison needs them); an unknown key raises ValueError naming the known ones.
    """
    names = [c.name for c in scenario.clusters]
    zones = {c.name: c.zone for c in scenario.clusters}
    spatial_all = spatial_policies(scenario.policy, scenario.compare, names, zones)
    batch_all = batch_policies(scenario.policy, scenario.compare)
    spatial_lineup, batch_lineup = _keep(spatial_all, only), _keep(batch_all, only)
    known = {p.key for p in spatial_all[1:]} | {p.key for p in batch_all[1:]}
    known |= set(MULTIKUEUE_KEYS)
    unknown = sorted(set(only) - known)
    if unknown:
        raise ValueError(f"unknown policy {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    steps = scenario.hours if scenario.workloads else 0
    steps += len(scenario.batch) * (len(batch_lineup) + 1)
    if scenario.multikueue is not None:
        steps += 2 + len([k for k in MULTIKUEUE_KEYS if not only or k in only])
    started = time.perf_counter()
    spatial = temporal = multikueue = None
    with Progress(steps, f"simulating {scenario.name}", enabled=progress) as bar:
        if scenario.workloads:
            runs = simulate_spatial(scenario, grid, spatial_lineup, tick=bar.advance)
            spatial = Part(runs, compare(runs, scenario.hours))
        if scenario.batch:
            runs = simulate_batch(scenario, grid, batch_lineup, tick=bar.advance)
            temporal = Part(runs, compare(runs, scenario.hours))
        if scenario.multikueue is not None:
            runs = simulate_multikueue(scenario, grid, only, tick=bar.advance)
            multikueue = Part(runs, compare(runs, scenario.hours))
    ranking = forecast_ranking(scenario, grid) if scenario.batch else []
    seconds = time.perf_counter() - started
    return Outcome(scenario, grid, spatial, temporal, seconds, ranking, multikueue)


def forecast_ranking(scenario: Scenario, grid: Grid) -> list[Ranking]:
    """Each forecast's ranking quality over the scenario's batch pools, its own first;
    then the same per zone (``Ranking.zone`` set), zone by zone."""
    pools = [(p.zone, grid.values[p.zone], p.length_hours, p.slack_hours) for p in scenario.batch]
    first = scenario.compare.forecast
    methods = [first, *(m for m in offered() if m is not first)]
    judged = [judge_each(m, pools, days=scenario.compare.forecast_days) for m in methods]
    overall = [rankings[0] for rankings in judged]
    zones = list(dict.fromkeys(p.zone for p in scenario.batch))
    per_zone = [r for zone in zones for rankings in judged for r in rankings[1:] if r.zone == zone]
    return [*overall, *per_zone] if len(zones) > 1 else overall


_P = TypeVar("_P", SpatialPolicy, PausePolicy)


def _keep(lineup: list[_P], only: Sequence[str]) -> list[_P]:
    """The baseline (first) plus the policies named in ``only`` (all when it is empty)."""
    return lineup[:1] + [p for p in lineup[1:] if not only or p.key in only]
