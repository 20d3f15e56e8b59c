"""PNG plots for the HTML report (matplotlib, Agg backend; import only when reporting).

Every line of a plot has its own colour and dash pattern (a qualitative colour map crossed
with dash styles, no pair repeated among up to 40 lines), so the lines stay apart in print
and for readers who do not tell the colours apart; the default row is drawn thicker and
named "(default)". Figures are in the unit that fits the scenario (``report.unit_for``):
tonnes once the largest figure reaches 1 t, else kilograms (else grams), never an axis or
a column of 0.00 t.

The cumulative plot shows, day by day, the emissions each policy avoided against the
carbon-agnostic baseline; the free oracle is the upper bound of that saving, and no series
can cross it; the constrained oracle (the scenario's constraints respected) is the target.
For batch runs each job counts at the hour it arrived, wherever it ran (``Run.by_arrival``),
so every series covers the same jobs at every hour: counted by the hour they run, a policy
that holds jobs back looks cleaner than the oracle until its backlog runs, and one that
never resumes before the data ends shows its whole unfinished tail as a spike on the last
day. A job that missed its deadline earns no saving.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from webhook.simulate.grid import Grid
from webhook.simulate.metrics import Role, Run
from webhook.simulate.report import unit_for

COLOURS = tuple(matplotlib.colormaps["tab10"].colors)  # type: ignore[attr-defined]
"""A qualitative colour map: ten hues told apart also in print."""
DASHES: tuple[tuple[float, ...], ...] = ((), (6.0, 2.0), (1.5, 1.5), (6.0, 2.0, 1.5, 2.0))
"""Solid, dashed, dotted, dash-dot (on/off lengths in points)."""
BASELINE_COLOUR = "0.45"
ORACLE_COLOUR = "black"


class Style(NamedTuple):
    """How one line is drawn."""

    colour: object
    dashes: tuple[float, ...]
    width: float


def styles(count: int) -> Iterator[tuple[object, tuple[float, ...]]]:
    """``count`` (colour, dash pattern) pairs, no pair twice while ``count`` <= 40.

    Line ``i`` takes colour ``i mod 10`` and dash ``(i + i // 10) mod 4``: a colour comes back
    only after ten lines, and then with another dash pattern."""
    for i in range(count):
        yield COLOURS[i % len(COLOURS)], DASHES[(i + i // len(COLOURS)) % len(DASHES)]


def _days(grid: Grid) -> list[float]:
    """Day number of each simulated day (the x axis of every plot)."""
    return [float(d) for d in range((grid.hours + 23) // 24)]


def _x_axis(ax: Axes, grid: Grid) -> None:
    ax.set_xlabel(f"days since {grid.start:%Y-%m-%d %H:%M} UTC")
    ax.grid(alpha=0.3)


def _daily_mean(values: Sequence[float]) -> list[float]:
    return [
        math.fsum(values[i : i + 24]) / len(values[i : i + 24]) for i in range(0, len(values), 24)
    ]


def intensity(grid: Grid, folder: Path) -> str:
    """Daily mean intensity per zone; returns the file name."""
    fig, ax = plt.subplots(figsize=(11, 4.5))
    days = _days(grid)
    zones = sorted(grid.values)
    for zone, (colour, dashes) in zip(zones, styles(len(zones)), strict=True):
        ax.plot(
            days, _daily_mean(grid.values[zone]), label=zone, color=colour, dashes=dashes,
            linewidth=1.2,
        )  # fmt: skip
    _x_axis(ax, grid)
    ax.set_ylabel("gCO2eq/kWh")
    ax.legend(ncol=5, fontsize="small")
    return _save(fig, folder, "intensity.png")


def charged(run: Run) -> Sequence[float]:
    """The run's gCO2eq per hour as the cumulative plot counts it: batch jobs at their
    arrival hour (``Run.by_arrival``), everything else at the hour it was emitted."""
    return run.by_arrival if len(run.by_arrival) else run.hourly


def avoided(runs: Sequence[Run]) -> dict[str, list[float]]:
    """Cumulative gCO2eq each run avoided against the baseline, hour by hour (the series of
    the cumulative plot; the baseline's is zero, the oracle's the largest)."""
    baseline = charged(next(r for r in runs if r.role is Role.BASELINE))
    out = {}
    for run in runs:
        acc, series = 0.0, []
        for base, value in zip(baseline, charged(run), strict=True):
            acc += base - value
            series.append(acc)
        out[run.key] = series
    return out


def _style(
    run: Run, palette: Iterator[tuple[object, tuple[float, ...]]], default: str | None
) -> Style:
    if run.role is Role.BASELINE:
        return Style(BASELINE_COLOUR, (1.0, 2.5), 1.2)
    if run.role is Role.ORACLE:
        return Style(ORACLE_COLOUR, (8.0, 2.0, 1.5, 2.0, 1.5, 2.0), 1.8)
    if run.role is Role.FREE_ORACLE:
        return Style(ORACLE_COLOUR, (2.0, 2.0), 1.0)
    if run.role is Role.BUDGET_ORACLE:
        return Style(ORACLE_COLOUR, (6.0, 3.0), 1.4)
    colour, dashes = next(palette)
    return Style(colour, dashes, 2.8 if run.key == default else 1.3)


def legend_name(run: Run, default: str | None) -> str:
    """The run's name in a legend: its key, "(default)" on carbonshift's default row, and
    which oracle an oracle is."""
    if run.role is Role.ORACLE:
        return f"{run.key} (constrained: the target)"
    if run.role is Role.FREE_ORACLE:
        return f"{run.key} (free: upper bound)"
    if run.role is Role.BUDGET_ORACLE:
        return f"{run.key} (within the move budget)"
    return f"{run.key} (default)" if run.key == default else run.key


def cumulative(
    runs: Sequence[Run], grid: Grid, folder: Path, part: str, default: str | None = None
) -> str:
    """Cumulative emissions avoided against the baseline per run, the oracle as the bound;
    returns the file name."""
    series = avoided(runs)
    unit = unit_for(max((abs(v) for s in series.values() for v in s), default=0.0))
    fig, ax = plt.subplots(figsize=(12, 5.5))
    hours = [h / 24 for h in range(grid.hours)]
    policies = sum(1 for r in runs if r.role is Role.POLICY)
    palette = styles(policies)
    for run in runs:
        style = _style(run, palette, default)
        ax.plot(
            hours,
            [v / unit.grams for v in series[run.key]],
            label=legend_name(run, default),
            color=style.colour,
            dashes=style.dashes,
            linewidth=style.width,
            zorder=3 if run.key == default or run.role is not Role.POLICY else 2,
        )
    _x_axis(ax, grid)
    counted = "jobs by arrival hour, " if part != "spatial" else ""
    ax.set_ylabel(f"{unit.name}CO2eq avoided vs baseline (cumulative)")
    ax.set_title(
        f"Emissions avoided against the baseline ({counted}constrained oracle = target, "
        "free oracle = upper bound)",
        fontsize="medium",
    )
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    return _save(fig, folder, f"cumulative-{part}.png")


def shares(runs: Sequence[Run], grid: Grid, folder: Path) -> str:
    """Stacked share of replica-hours per cluster per day, one panel per run."""
    fig, axes = plt.subplots(len(runs), 1, figsize=(11, 3 * len(runs)), sharex=True, squeeze=False)
    days = _days(grid)
    for ax, run in zip(axes[:, 0], runs, strict=True):
        names = sorted(run.daily_share)
        totals = [sum(run.daily_share[n][d] for n in names) or 1.0 for d in range(len(days))]
        stacks = [[run.daily_share[n][d] / totals[d] for d in range(len(days))] for n in names]
        ax.stackplot(days, stacks, labels=names, colors=[c for c, _ in styles(len(names))])
        ax.set_title(run.key, fontsize="medium")
        ax.set_ylim(0, 1)
        ax.set_ylabel("share")
    _x_axis(axes[-1, 0], grid)
    axes[0, 0].legend(ncol=5, fontsize="small", loc="upper right")
    return _save(fig, folder, "shares.png")


def _save(fig: Figure, folder: Path, name: str) -> str:
    fig.tight_layout()
    fig.savefig(folder / name, dpi=100)
    plt.close(fig)
    return name
