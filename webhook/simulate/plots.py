"""PNG plots for the HTML report (matplotlib, Agg backend; import only when reporting)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from webhook.simulate.grid import Grid
from webhook.simulate.metrics import Run


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
    for zone in sorted(grid.values):
        ax.plot(days, _daily_mean(grid.values[zone]), label=zone, linewidth=1)
    _x_axis(ax, grid)
    ax.set_ylabel("gCO2eq/kWh")
    ax.legend(ncol=5, fontsize="small")
    return _save(fig, folder, "intensity.png")


def cumulative(runs: Sequence[Run], grid: Grid, folder: Path, part: str) -> str:
    """Cumulative emissions of each run; returns the file name."""
    fig, ax = plt.subplots(figsize=(11, 4.5))
    hours = [h / 24 for h in range(grid.hours)]
    for run in runs:
        acc, series = 0.0, []
        for value in run.hourly:
            acc += value
            series.append(acc / 1e6)
        style = "--" if run.role.value != "policy" else "-"
        ax.plot(hours, series, style, label=run.key, linewidth=1.2)
    _x_axis(ax, grid)
    ax.set_ylabel("tCO2eq (cumulative)")
    ax.legend(fontsize="small")
    return _save(fig, folder, f"cumulative-{part}.png")


def shares(runs: Sequence[Run], grid: Grid, folder: Path) -> str:
    """Stacked share of replica-hours per cluster per day, one panel per run."""
    fig, axes = plt.subplots(len(runs), 1, figsize=(11, 3 * len(runs)), sharex=True, squeeze=False)
    days = _days(grid)
    for ax, run in zip(axes[:, 0], runs, strict=True):
        names = sorted(run.daily_share)
        totals = [sum(run.daily_share[n][d] for n in names) or 1.0 for d in range(len(days))]
        stacks = [[run.daily_share[n][d] / totals[d] for d in range(len(days))] for n in names]
        ax.stackplot(days, stacks, labels=names)
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
