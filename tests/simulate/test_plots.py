"""The simulator's plots: distinct line styles, the unit that fits, and a cumulative series
no policy can push past the oracle (batch jobs counted by their arrival hour)."""

from __future__ import annotations

import itertools
from array import array
from pathlib import Path
from typing import Any

import pytest

from tests.simulate.grids import MakeGrid, MakeScenario
from webhook.simulate.batch import batch_policies
from webhook.simulate.engine import simulate_batch
from webhook.simulate.metrics import Role, Run, compare
from webhook.simulate.report import table

plots = pytest.importorskip("webhook.simulate.plots")


@pytest.mark.parametrize(
    ("grams", "unit"),
    [
        (2_410_000_000.0, "t"),  # a fleet's year
        (1_000_000.0, "t"),
        (999_999.0, "kg"),  # 1.00 t at 2 decimals, but 999.999 kg says more
        (40_000.0, "kg"),  # a week of a small fleet: 0.04 t
        (4_999.0, "kg"),  # 0.004999 t would print as 0.00
        (1.0e3, "kg"),
        (999.0, "g"),
        (0.0, "g"),
        (-1_234.0, "kg"),  # a policy worse than the baseline
    ],
)
def test_the_unit_is_the_largest_in_which_the_figure_is_at_least_one(
    grams: float, unit: str
) -> None:
    assert plots.unit_for(grams).name == unit


def test_the_tables_use_the_unit_that_fits() -> None:
    """A week of a small fleet prints kilograms, not a column of 0.00 t."""
    week = [
        _run(Role.BASELINE, "baseline", [200.0] * 24),
        _run(Role.POLICY, "p", [150.0] * 24),
        _run(Role.ORACLE, "oracle", [100.0] * 24),
    ]
    small = table(compare(week, 24), temporal=False)
    assert "kgCO2eq" in small.splitlines()[0]
    assert " 4.80 " in small  # the baseline: 4,800 g
    year = [_run(r.role, r.key, [v * 1000 for v in r.hourly]) for r in week]
    assert "tCO2eq" in table(compare(year, 24), temporal=False).splitlines()[0]


def test_no_two_lines_share_a_colour_and_dash_pattern() -> None:
    pairs = list(plots.styles(16))
    assert len(set(map(repr, pairs))) == 16
    # Neighbours differ in both, so even adjacent legend entries are told apart by the dash.
    for (c1, d1), (c2, d2) in itertools.pairwise(pairs):
        assert c1 != c2
        assert d1 != d2
    assert len(set(map(repr, plots.styles(40)))) == 40


def _run(role: Role, key: str, hourly: list[float], by_arrival: list[float] | None = None) -> Run:
    run = Run(key, key, role, "", array("d", hourly))
    if by_arrival is not None:
        run.by_arrival = array("d", by_arrival)
    return run


def test_batch_jobs_count_at_their_arrival_hour() -> None:
    """A held-back backlog neither looks cleaner than the oracle while it waits nor spikes
    when it finally runs."""
    baseline = _run(Role.BASELINE, "run-now", [5, 5, 5, 0], [5, 5, 5, 0])
    held = _run(Role.POLICY, "held", [0, 0, 0, 12], [4, 4, 4, 0])
    oracle = _run(Role.ORACLE, "oracle", [3, 3, 3, 0], [3, 3, 3, 0])
    series = plots.avoided([baseline, held, oracle])
    assert series["run-now"] == [0, 0, 0, 0]
    assert series["held"] == [1, 2, 3, 3]
    assert series["oracle"] == [2, 4, 6, 6]
    spatial = _run(Role.POLICY, "spatial", [1, 2])
    assert list(plots.charged(spatial)) == [1, 2]


def test_no_batch_series_is_above_the_oracle(
    make_grid: MakeGrid, make_scenario: MakeScenario
) -> None:
    """Every temporal policy, including the pause without a deadline guard that waits past
    deadlines and leaves an unfinished backlog at the end, on a grid whose clean hours are
    further apart than the jobs' slack."""
    hours = 24 * 12
    dirty = [650.0 + 150 * ((h // 30) % 2) - 40 * (h % 24 < 6) for h in range(hours)]
    dirty[-10:] = [80.0] * 10  # a clean end, where a backlog dumped there would look cheap
    varied = [300.0 + 250 * ((h // 7) % 3 == 0) - 200 * (h % 24 in (2, 3)) for h in range(hours)]
    grid = make_grid({"DI": dirty, "VA": varied})
    scenario = make_scenario(
        hours,
        batch=[
            {"name": "d", "zone": "DI", "length_hours": 2, "slack_hours": 6},
            {"name": "v", "zone": "VA", "length_hours": 1, "slack_hours": 12, "replicas": 3},
        ],
    )
    runs = simulate_batch(scenario, grid, batch_policies(scenario.policy, scenario.compare))
    assert any(r.misses for r in runs), "the scenario must make a policy miss deadlines"
    for run in runs:  # the totals are still what the table shows
        assert sum(run.by_arrival) >= run.total - 1e-6 * run.total
    series = plots.avoided(runs)
    for bound in ("oracle", "oracle-free"):  # the target, then the upper bound
        oracle = series[bound]
        for key, values in series.items():
            if key == "oracle-free":
                continue
            pairs = enumerate(zip(values, oracle, strict=True))
            above = [h for h, (v, o) in pairs if v > o + 1e-6]
            assert not above, f"{key} above {bound} from hour {above[:1]}"
    free, oracle = series["oracle-free"], series["oracle"]
    assert all(f >= o - 1e-6 for f, o in zip(free, oracle, strict=True))


def test_the_cumulative_plot_renders_the_default_row_thicker(
    tmp_path: Path, make_grid: MakeGrid
) -> None:
    grid = make_grid({"Z": [100.0] * 48})
    runs = [
        _run(Role.BASELINE, "baseline", [10.0] * 48),
        *(_run(Role.POLICY, f"p{i}", [9.0 - i / 10] * 48) for i in range(14)),
        _run(Role.ORACLE, "oracle", [7.0] * 48),
    ]
    drawn: list[tuple[str, float, object, tuple[float, ...]]] = []
    real = plots.plt.Axes.plot

    def spy(ax: Any, *args: Any, **kwargs: Any) -> Any:
        drawn.append((str(kwargs["label"]), float(kwargs["linewidth"]), kwargs["color"],
                      tuple(kwargs["dashes"])))  # fmt: skip
        return real(ax, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(plots.plt.Axes, "plot", spy)
        name = plots.cumulative(runs, grid, tmp_path, "spatial", default="p3")
    assert (tmp_path / name).stat().st_size > 0
    widths = {label: width for label, width, _, _ in drawn}
    assert widths["p3 (default)"] > max(w for k, w in widths.items() if k != "p3 (default)")
    styles = [(repr(c), d) for _, _, c, d in drawn]
    assert len(set(styles)) == len(runs)
