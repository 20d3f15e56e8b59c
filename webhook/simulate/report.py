"""Presenting an outcome: a terminal table, a JSON document, an HTML report with plots.

The HTML report needs matplotlib (the ``sim`` extra); everything else is standard
library only.
"""

from __future__ import annotations

import html
import importlib.util
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import msgspec

from webhook.model.config import Config, document
from webhook.model.errors import ReportUnavailable as ReportUnavailable  # noqa: PLC0414 - callers import it here
from webhook.simulate.batch import DEFAULT_TEMPORAL
from webhook.simulate.budget import MOVE_BUDGET_SHARE
from webhook.simulate.grid import Grid
from webhook.simulate.metrics import Role, Row, Run
from webhook.simulate.multikueue import DEFAULT_MULTIKUEUE
from webhook.simulate.outcome import Outcome, Part
from webhook.simulate.policies import DEFAULT_SPATIAL, GREEDY
from webhook.simulate.ranking import Ranking

INSTALL_HINT = "pip install 'carbonshift[sim]'"


def years(grid: Grid) -> str:
    """The calendar years (UTC) of the replayed hours: ``2023``, ``2022-2023``."""
    first = grid.start.year
    last = grid.time(max(grid.hours - 1, 0)).year
    return str(first) if first == last else f"{first}-{last}"


def attribution(grid: Grid) -> str:
    """The data attribution line, naming the years the replayed traces are from."""
    return f"Intensity data: Electricity Maps (hourly {years(grid)} exports, ODbL 1.0)."


class Unit(NamedTuple):
    """A mass unit of CO2eq for an axis: its name and grams per unit."""

    name: str
    grams: float


UNITS = (Unit("t", 1e6), Unit("kg", 1e3), Unit("g", 1.0))


def unit_for(grams: float) -> Unit:
    """The largest unit in which ``grams`` is at least 1: tonnes for a fleet's year,
    kilograms for a short scenario (never a column of 0.00 t), grams for a tiny one."""
    for unit in UNITS[:-1]:
        if abs(grams) / unit.grams >= 1:
            return unit
    return UNITS[-1]


def is_default(row: Row, *, temporal: bool) -> bool:
    """Whether ``row`` is carbonshift's default behaviour (one row per table)."""
    if temporal:
        return row.key in (DEFAULT_TEMPORAL, DEFAULT_MULTIKUEUE)
    return row.key == DEFAULT_SPATIAL


def _name(row: Row, temporal: bool) -> str:
    return f"{row.key} (default)" if is_default(row, temporal=temporal) else row.key


# --- text ------------------------------------------------------------------------------------

_OF = ("of constrained oracle %", "of free oracle %")
_SPATIAL_HEAD = (
    "policy", "tCO2eq", "saved %", *_OF, "of budget oracle %", "moves/day", "updates/day",
    "uses",
)  # fmt: skip
_TEMPORAL_HEAD = (
    "policy", "tCO2eq", "saved %", *_OF, "misses", "wait h", "updates/day", "uses",
)  # fmt: skip


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _cells(row: Row, temporal: bool, unit: Unit = UNITS[0]) -> tuple[str, ...]:
    common = (
        _name(row, temporal),
        f"{row.total_kg * 1000 / unit.grams:.2f}",
        f"{row.saved_pct:.1f}",
        _pct(row.captured_pct),
        _pct(row.captured_free_pct),
    )
    if temporal:
        return (
            *common,
            f"{row.misses}/{row.jobs}",
            f"{row.mean_wait_hours:.1f}",
            _per_day(row.changes_per_day),
            row.info,
        )
    return (
        *common,
        _pct(row.captured_budget_pct),
        _per_day(row.moves_per_day),
        _per_day(row.changes_per_day),
        row.info,
    )


def _per_day(value: float | None) -> str:
    """A count per day; ``n/a`` where none is counted (the oracles write no policy)."""
    return "n/a" if value is None else f"{value:.2f}"


def _grid(head: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
    lines = []
    for r in [head, *body]:
        cells = [
            c.ljust(w) if i in (0, len(head) - 1) else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _head(rows: Sequence[Row], temporal: bool) -> tuple[tuple[str, ...], Unit]:
    """The table's head, its mass column in the unit that fits the rows (``tCO2eq`` for a
    fleet's year, ``kgCO2eq`` when every row would print as 0.00 t)."""
    unit = unit_for(max((abs(r.total_kg) * 1000 for r in rows), default=0.0))
    head = _TEMPORAL_HEAD if temporal else _SPATIAL_HEAD
    return (head[0], f"{unit.name}CO2eq", *head[2:]), unit


def table(rows: Sequence[Row], *, temporal: bool) -> str:
    """The results as an aligned plain-text table."""
    head, unit = _head(rows, temporal)
    return _grid(head, [_cells(r, temporal, unit) for r in rows])


def markdown(rows: Sequence[Row], *, temporal: bool) -> str:
    """The results as a Markdown table (for the README)."""
    head, unit = _head(rows, temporal)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(_cells(r, temporal, unit)) + " |" for r in rows]
    return "\n".join(lines)


def text(outcome: Outcome) -> str:
    """Everything for the terminal: what ran, the table(s), attribution, timing."""
    s = outcome.scenario
    out = [
        f"scenario {s.name}: {s.start:%Y-%m-%d %H:%M} to {s.end:%Y-%m-%d %H:%M} UTC, "
        f"{s.hours} h, {len(outcome.grid.values)} zones, {s.column.value} intensity"
    ]
    if outcome.spatial:
        out += [
            "",
            "spatial (workloads across clusters)",
            table(outcome.spatial.rows, temporal=False),
            budget_line(outcome.spatial),
        ]
    if outcome.temporal:
        out += [
            "",
            "temporal (batch jobs, NodePool pause)",
            table(outcome.temporal.rows, temporal=True),
        ]
    if outcome.multikueue:
        out += [
            "",
            "batch across clusters (Kueue MultiKueue)",
            table(outcome.multikueue.rows, temporal=True),
        ]
    if outcome.ranking:
        out += [
            "",
            "forecast ranking (decision windows of the batch pools)",
            _ranking_table(outcome),
        ]
        if _zone_rows(outcome):
            out += ["", "forecast ranking by zone", _zone_table(outcome)]
    out += ["", attribution(outcome.grid), f"simulated in {outcome.seconds:.1f} s"]
    return "\n".join(out)


def budget_line(part: Part) -> str:
    """What the budget oracle was allowed and how exactly it is known; without scipy,
    how to get it."""
    run = next((r for r in part.runs if r.role is Role.BUDGET_ORACLE), None)
    if run is None:
        return f"budget oracle: needs scipy ({INSTALL_HINT})"
    d = run.details
    how = "optimal" if d.get("optimal") else f"lower bound {d.get('lower_bound_kg')} kg"
    return (
        f"budget oracle: at most {MOVE_BUDGET_SHARE:.0%} of greedy's moves: "
        f"{d.get('move_budget')} of {d.get('greedy_moves')}, {d.get('moves')} spent ({how}; "
        "moves counted on the fleet's replicas per cluster)"
    )


def _budget_json(part: Part | None) -> dict[str, Any] | None:
    run = (
        None if part is None else next((r for r in part.runs if r.role is Role.BUDGET_ORACLE), None)
    )
    if run is None:
        return None
    return {**run.details, "share_of_greedy": MOVE_BUDGET_SHARE}


_RANKING_HEAD = (
    "forecast",
    "windows",
    "top quarter %",
    "spearman",
    "start saving %",
    "nMAE %",
)
"""WattTime's three measures are ``spearman`` (mean of each window's), ``start saving %``
(reduction over potential) and ``nMAE %``."""


def _ranked(outcome: Outcome, rankings: list[Ranking]) -> list[tuple[str, ...]]:
    used = outcome.scenario.compare.forecast.value
    return [
        (
            f"{r.method} (used)" if r.method == used else r.method,
            str(r.windows),
            f"{100 * r.top:.1f}",
            f"{r.spearman:.3f}",
            _pct(r.captured),
            _pct(r.nmae),
        )
        for r in rankings
    ]


def _ranking_cells(outcome: Outcome) -> list[tuple[str, ...]]:
    return _ranked(outcome, [r for r in outcome.ranking if r.zone is None])


def _zone_rows(outcome: Outcome) -> list[Ranking]:
    return [r for r in outcome.ranking if r.zone is not None]


def _ranking_table(outcome: Outcome) -> str:
    return _grid(_RANKING_HEAD, _ranking_cells(outcome))


def _zone_table(outcome: Outcome) -> str:
    rows = _zone_rows(outcome)
    cells = [(r.zone or "", *c) for r, c in zip(rows, _ranked(outcome, rows), strict=True)]
    return _grid(("zone", *_RANKING_HEAD), cells)


# --- JSON ------------------------------------------------------------------------------------


def _row_json(row: Row, temporal: bool) -> dict[str, Any]:
    return {
        "policy": row.key,
        "label": row.label,
        "role": row.role,
        "default": is_default(row, temporal=temporal),
        "uses": row.info,
        "kg_co2eq": round(row.total_kg, 3),
        "saved_pct": round(row.saved_pct, 3),
        "constrained_oracle_captured_pct": _round(row.captured_pct),
        "free_oracle_captured_pct": _round(row.captured_free_pct),
        **({} if temporal else {"budget_oracle_captured_pct": _round(row.captured_budget_pct)}),
        "moves_per_day": _round(row.moves_per_day, 4),
        "updates_per_day": _round(row.changes_per_day, 4),
        "deadline_misses": row.misses,
        "jobs": row.jobs,
        "mean_wait_hours": round(row.mean_wait_hours, 3),
    }


def _changed(doc: Mapping[str, Any], default: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of ``doc`` whose values differ from those of ``default``, mappings compared
    key by key (a config file's shape: what a scenario's ``policy`` changed)."""
    out: dict[str, Any] = {}
    for key, value in doc.items():
        base = default.get(key)
        if isinstance(value, Mapping) and isinstance(base, Mapping):
            inner = _changed(value, base)
            if inner:
                out[key] = inner
        elif value != base:
            out[key] = value
    return out


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def _rows_json(part: Part | None, *, temporal: bool) -> list[dict[str, Any]] | None:
    return None if part is None else [_row_json(r, temporal) for r in part.rows]


def to_json(outcome: Outcome) -> dict[str, Any]:
    """A JSON-ready summary of the outcome."""
    s = outcome.scenario
    return {
        "scenario": s.name,
        "start": s.start.isoformat(),
        "end": s.end.isoformat(),
        "hours": s.hours,
        "zones": sorted(outcome.grid.values),
        "column": s.column.value,
        "policy": _changed(document(s.policy), document(Config())),
        "compare": msgspec.to_builtins(s.compare),
        "spatial": _rows_json(outcome.spatial, temporal=False),
        "budget_oracle": _budget_json(outcome.spatial),
        "forecast_ranking": [
            {
                "forecast": r.method,
                "used": r.method == s.compare.forecast.value,
                "windows": r.windows,
                "top_quarter_share": round(r.top, 4),
                "spearman": round(r.spearman, 4),
                "start_saving_captured_pct": _round(r.captured),
                "nmae_pct": _round(r.nmae),
                **({"zone": r.zone} if r.zone is not None else {}),
            }
            for r in outcome.ranking
        ],
        "temporal": _rows_json(outcome.temporal, temporal=True),
        "multikueue": _rows_json(outcome.multikueue, temporal=True),
        "seconds": round(outcome.seconds, 3),
        "years": years(outcome.grid),
        "attribution": attribution(outcome.grid),
    }


# --- HTML ------------------------------------------------------------------------------------


def require_matplotlib() -> None:
    """Raise :class:`ReportUnavailable` with the install command when matplotlib is missing."""
    if importlib.util.find_spec("matplotlib") is None:
        raise ReportUnavailable(f"--report needs matplotlib; install it with: {INSTALL_HINT}")


def write_html(outcome: Outcome, folder: str | Path) -> Path:
    """Write ``index.html`` and its PNG plots into ``folder``; returns the HTML path."""
    require_matplotlib()
    from webhook.simulate import plots  # noqa: PLC0415 - optional dependency

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    figures = [("Intensity per zone (daily mean)", plots.intensity(outcome.grid, folder))]
    parts = (
        ("spatial", outcome.spatial, DEFAULT_SPATIAL),
        ("temporal", outcome.temporal, DEFAULT_TEMPORAL),
        ("multikueue", outcome.multikueue, DEFAULT_MULTIKUEUE),
    )
    for title, part, default in parts:
        if part is None:
            continue
        figures.append(
            (
                f"Cumulative emissions avoided against the baseline, {title}",
                plots.cumulative(
                    part.runs,
                    outcome.grid,
                    folder,
                    title,
                    default,
                ),
            )
        )
    if outcome.spatial:
        figures.append(
            (
                "Share of work per cluster (daily)",
                plots.shares(_share_runs(outcome.spatial), outcome.grid, folder),
            )
        )
    path = folder / "index.html"
    path.write_text(_page(outcome, figures), "utf-8")
    return path


def _share_runs(part: Part) -> list[Run]:
    """Baseline, the lowest-emitting policy, carbonshift's lowest (if other) and the
    constrained oracle."""
    runs = part.runs
    policies = [r for r in runs if r.role.value == "policy"]
    picked = [runs[0]]
    if policies:
        picked.append(min(policies, key=lambda r: r.total))
        own = [r for r in policies if not r.key.startswith(GREEDY)]
        if own and min(own, key=lambda r: r.total) not in picked:
            picked.append(min(own, key=lambda r: r.total))
    return [*picked, runs[-1]]


def _html_table(rows: Sequence[Row], temporal: bool) -> str:
    head, unit = _head(rows, temporal)
    out = ["<table>", "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"]
    for row in rows:
        cells = _cells(row, temporal, unit)
        title = html.escape(row.label)
        out.append(
            f'<tr title="{title}">' + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>"
        )
    out.append("</table>")
    return "\n".join(out)


def _page(outcome: Outcome, figures: Sequence[tuple[str, str]]) -> str:
    s = outcome.scenario
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>carbonshift simulation: {html.escape(s.name)}</title>",
        "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
        "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.3em .6em}"
        "td{text-align:right}td:first-child,td:last-child{text-align:left}"
        "img{max-width:100%}</style></head><body>",
        f"<h1>Simulation: {html.escape(s.name)}</h1>",
        f"<p>{html.escape(s.description)}</p>" if s.description else "",
        f"<p>{s.start:%Y-%m-%d %H:%M} to {s.end:%Y-%m-%d %H:%M} UTC ({s.hours} hours), "
        f"{len(outcome.grid.values)} zones, {s.column.value} intensity; "
        f"re-evaluation every {s.interval_hours} h.</p>",
    ]
    if outcome.spatial:
        parts += [
            "<h2>Spatial</h2>",
            _html_table(outcome.spatial.rows, temporal=False),
            f"<p>{html.escape(budget_line(outcome.spatial))}</p>",
        ]
    if outcome.temporal:
        parts += ["<h2>Temporal (batch)</h2>", _html_table(outcome.temporal.rows, temporal=True)]
    if outcome.multikueue:
        parts += [
            "<h2>Batch across clusters (Kueue MultiKueue)</h2>",
            _html_table(outcome.multikueue.rows, temporal=True),
        ]
    if outcome.ranking:
        parts += ["<h2>Forecast ranking (decision windows)</h2>", "<table>"]
        parts.append(
            "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in _RANKING_HEAD) + "</tr>"
        )
        for cells in _ranking_cells(outcome):
            parts.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
        parts.append("</table>")
    parts.append(
        "<p>Savings are ratio-of-sums against the carbon-agnostic baseline; “of constrained "
        "oracle” is the share captured of the saving of perfect knowledge within the "
        "scenario's capacities, <code>movable: false</code> and deadlines (the target); "
        "“of free oracle” the share of the upper bound's, which also moves immovable work "
        "and splits batch jobs; “of budget oracle” the share of the saving of perfect "
        "knowledge within those constraints and the spatial target's move budget. Hover a "
        "row for the policy's description.</p>"
    )
    for title, name in figures:
        parts += [
            f"<h2>{html.escape(title)}</h2>",
            f'<img src="{html.escape(name)}" alt="{html.escape(title)}">',
        ]
    parts += [f"<p><small>{html.escape(attribution(outcome.grid))}</small></p>", "</body></html>"]
    return "\n".join(p for p in parts if p)
