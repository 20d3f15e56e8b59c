"""The report as a table, JSON, or one self-contained HTML page with inline SVG plots."""

from __future__ import annotations

import datetime
import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from webhook.model.objects import mapping
from webhook.model.vocabulary import parse_time
from webhook.report import basis as accounting_basis
from webhook.report.data import Report, Row

PALETTE = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d",
           "#666666", "#1f78b4", "#b2df8a")  # fmt: skip


def _num(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def _grams(value: float) -> str:
    """Grams as g, kg or t."""
    if abs(value) >= 1e6:
        return f"{value / 1e6:,.2f} t"
    if abs(value) >= 1e3:
        return f"{value / 1e3:,.2f} kg"
    return f"{value:,.1f} g"


HEADERS = ("OBJECT", "SIGNAL/METHOD", "ENERGY kWh", "INTENSITY g/kWh", "EMISSIONS",
           "COUNTERFACTUAL", "AVOIDED", "SAVED", "MOVES")  # fmt: skip


def _cells(row: Row) -> list[str]:
    t = row.totals
    name = "/".join(p for p in (row.kind, row.namespace, row.name) if p)
    saved = t.saved_percent
    return [
        name,
        f"{t.signal}/{t.method}",
        _num(t.kwh, 3),
        _num(row.intensity),
        _grams(t.grams),
        _grams(t.counterfactual_grams),
        _grams(t.avoided_grams),
        "-" if saved is None else f"{saved:.1f} %",
        str(row.moves),
    ]


SCI_HEADERS = ("OBJECT", "SIGNAL/METHOD", "SCI", "PER", "UNITS", "OPERATIONAL", "EMBODIED")


def _name(row: Row) -> str:
    return "/".join(p for p in (row.kind, row.namespace, row.name) if p)


def _sci_cells(report: Report, row: Row) -> list[str]:
    sci = report.sci(row)
    rate = sci["rate_g_per_unit"]
    return [
        _name(row),
        f"{row.totals.signal}/{row.totals.method}",
        "-" if rate is None else f"{rate:,.3f} g",
        sci["functional_unit"],
        _num(sci["units"]),
        _grams(sci["operational_g"]),
        _grams(sci["embodied_g"]),
    ]


CLUSTER_HEADERS = ("CLUSTER", "SIGNAL/METHOD", "REPLICA-HOURS", "COUNTERFACTUAL R-H",
                   "GAINED/LOST R-H", "ENERGY kWh", "INTENSITY g/kWh", "EMISSIONS THERE",
                   "COUNTERFACTUAL THERE")  # fmt: skip
"""A cluster's columns: what it ran against what the user's own policy would have run
there, and what that emitted there. Avoided emissions and shares saved belong to
workloads and the fleet: a green cluster that takes the work emits more there."""


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+,.1f}"


def _cluster_cells(row: Row) -> list[str]:
    t = row.totals
    return [
        row.name,
        f"{t.signal}/{t.method}",
        _num(row.replica_hours),
        _num(row.counterfactual_replica_hours),
        _signed(row.replica_hours_gained),
        _num(t.kwh, 3),
        _num(row.intensity),
        _grams(t.grams),
        _grams(t.counterfactual_grams),
    ]


def _table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                     for r in rows)  # fmt: skip


def table(report: Report) -> str:
    """Plain text: fleet totals, workloads, clusters, then the decision history."""
    since = report.accounting_since
    doc = report.to_json()
    lines = [
        f"carbonshift report: every section covers {report.window()}",
        f"generated {doc['generated']}, accounting since {doc['accounting_since'] or 'never'}, "
        f"figures from the {report.source}",
        accounting_basis.STATEMENT,
        "",
    ]
    if since is None and not report.workloads:
        lines.append("no accounting yet: the leader writes it every accounting.interval_seconds")
    for title, rows in (("FLEET", report.totals), ("WORKLOADS", report.workloads)):
        if rows:
            lines += [title, _table([HEADERS, *(_cells(r) for r in rows)]), ""]
    if report.totals or report.workloads:
        lines.append("BASIS")
        lines.append(_table([("OBJECT", "SIGNAL/METHOD", "BASIS (DATA SET, YEAR)")] + [
            (_name(r), f"{r.totals.signal}/{r.totals.method}",
             accounting_basis.label(r.totals, report.window_start, report.generated))
            for r in (*report.totals, *report.workloads)
        ]))  # fmt: skip
        lines.append("")
    if report.workloads:
        lines.append("SCI (ISO/IEC 21031: (E x I + M) / R, location-based)")
        lines.append(_table([SCI_HEADERS, *(_sci_cells(report, r) for r in report.workloads)]))
        lines += ["SCI boundary", *accounting_basis.boundary_lines(), ""]
    if report.clusters:
        cells = [_cluster_cells(r) for r in report.clusters]
        lines += ["CLUSTERS", _table([CLUSTER_HEADERS, *cells]), ""]
    if report.history:
        lines.append("DECISION HISTORY")
        lines.append(_table([("TIME", "OBJECT", "WHAT", "NOTE")] + [
            (e.to_json()["at"], e.object.replace("//", "/"), e.what, e.note[:120])
            for e in report.history
        ]))  # fmt: skip
    return "\n".join(lines).rstrip() + "\n"


def to_json(report: Report) -> str:
    return orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2).decode() + "\n"


# --- HTML ----------------------------------------------------------------------------------

Series = Mapping[str, Sequence[tuple[float, float]]]
"""Line name -> (x: unix seconds, y) points."""


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    if high <= low:
        high = low + 1
    raw = (high - low) / count
    step = 10 ** math.floor(math.log10(raw))
    for k in (1, 2, 5, 10):
        if raw <= k * step:
            step *= k
            break
    first = math.floor(low / step) * step
    return [first + i * step for i in range(count + 2) if first + i * step <= high + step / 2]


def svg_chart(title: str, series: Series, y_label: str, *, width: int = 860,
              height: int = 300) -> str:  # fmt: skip
    """One line chart as inline SVG (time on x, in UTC)."""
    left, right, top, bottom = 70, 200, 30, 40
    points = [p for line in series.values() for p in line]
    esc = html.escape
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" role="img" class="plot" '
            f'viewBox="0 0 {width} {height}" width="{width}" height="{height}">'
            f"<title>{esc(title)}</title>"
            f'<text x="{left}" y="18" class="t">{esc(title)}</text>')  # fmt: skip
    if not points:
        return head + f'<text x="{left}" y="{height // 2}">no data in the window</text></svg>'
    x0, x1 = min(p[0] for p in points), max(p[0] for p in points)
    y_ticks = _ticks(min(0.0, *(p[1] for p in points)), max(p[1] for p in points))
    y0, y1 = y_ticks[0], y_ticks[-1]
    if x1 <= x0:  # one instant: centre it in an hour
        x0, x1 = x0 - 1800, x1 + 1800
    plot_w, plot_h = width - left - right, height - top - bottom

    def sx(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * plot_w

    def sy(y: float) -> float:
        return top + plot_h - (y - y0) / ((y1 - y0) or 1) * plot_h

    out = [head]
    out.extend(
        f'<line x1="{left}" x2="{left + plot_w}" y1="{sy(y):.1f}" y2="{sy(y):.1f}" class="g"/>'
        f'<text x="{left - 6}" y="{sy(y) + 4:.1f}" class="yl">{y:g}</text>'
        for y in y_ticks
    )

    for k in range(5):
        x = x0 + (x1 - x0) * k / 4
        label = datetime.datetime.fromtimestamp(x, datetime.UTC).strftime("%m-%d %H:%M")
        out.append(f'<text x="{sx(x):.1f}" y="{height - bottom + 16}" class="xl">{label}</text>')
    middle = f"{top + plot_h / 2:.0f}"
    out.append(f'<text x="14" y="{middle}" class="yt" '
               f'transform="rotate(-90 14 {middle})">{esc(y_label)}</text>')  # fmt: skip
    for k, (name, line) in enumerate(sorted(series.items())):
        color = PALETTE[k % len(PALETTE)]
        dash = ' stroke-dasharray="6 4"' if "counterfactual" in name else ""
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in line)
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2"{dash} '
                   f'points="{path}"><title>{esc(name)}</title></polyline>')  # fmt: skip
        if len(line) == 1:  # a line through one point draws nothing: a marker does
            [(x, y)] = line
            out.append(f'<circle class="marker" cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="4" '
                       f'fill="{color}"><title>{esc(name)}: {y:g}</title></circle>')  # fmt: skip
        ly = top + 14 + k * 18
        out.append(f'<line x1="{width - right + 10}" x2="{width - right + 30}" y1="{ly - 4}" '
                   f'y2="{ly - 4}" stroke="{color}" stroke-width="3"{dash}/>'
                   f'<text x="{width - right + 36}" y="{ly}">{esc(name[:30])}</text>')  # fmt: skip
    out.append("</svg>")
    return "".join(out)


def _time(point: Mapping[str, Any]) -> float:
    return parse_time(str(point["t"])).timestamp()


def plots(report: Report) -> list[str]:
    """Intensity per cluster, cumulative emissions vs counterfactual, replicas per cluster."""
    intensity: dict[str, list[tuple[float, float]]] = {}
    replicas: dict[str, list[tuple[float, float]]] = {}
    cumulative: dict[str, list[tuple[float, float]]] = {}
    sums: dict[str, float] = {}
    for point in report.series:
        x = _time(point)
        for name, value in mapping(point, "i").items():
            intensity.setdefault(name, []).append((x, float(value)))
        for name, value in mapping(point, "r").items():
            replicas.setdefault(name, []).append((x, float(value)))
        for part, label in (("g", "actual"), ("c", "counterfactual")):
            for signal, grams in mapping(point, part).items():
                key = f"{label} ({signal})"
                sums[key] = sums.get(key, 0.0) + float(grams) / 1000.0
                cumulative.setdefault(key, []).append((x, sums[key]))
    return [
        svg_chart("Carbon intensity per cluster", intensity, "gCO2eq/kWh"),
        svg_chart("Cumulative emissions: actual vs counterfactual", cumulative, "kgCO2eq"),
        svg_chart("Replicas per cluster", replicas, "replicas"),
    ]


STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em;color:#222}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.6em}
table{border-collapse:collapse;font-size:.9em}
th,td{padding:.3em .7em;border-bottom:1px solid #ddd;text-align:right}
th:first-child,td:first-child,td.l,th.l{text-align:left}
.plot{display:block;margin:1em 0;background:#fafafa;border:1px solid #eee}
.plot text{font-size:11px;fill:#333}.plot .t{font-size:14px;font-weight:600}
.plot .g{stroke:#ddd}.plot .yl{text-anchor:end}.plot .xl{text-anchor:middle}
.plot .yt{text-anchor:middle}.note{color:#666;font-size:.9em}
.good{color:#1b7a3a}.bad{color:#b3261e}.more{color:#1f5fa8}.fewer{color:#8a5a00}
"""


def _html_clusters(rows: Sequence[Row]) -> str:
    body = []
    for row in rows:
        gained = row.replica_hours_gained
        mark = "" if not gained else "more" if gained > 0 else "fewer"
        tds = "".join(
            f'<td class="{mark}">{html.escape(c)}</td>' if i == 4 else
            f"<td>{html.escape(c)}</td>" for i, c in enumerate(_cluster_cells(row))
        )  # fmt: skip
        body.append(f"<tr>{tds}</tr>")
    head = "".join(f"<th>{html.escape(h)}</th>" for h in CLUSTER_HEADERS)
    note = (
        '<p class="note">Per cluster: the replica-hours it ran, those the user\'s own '
        "policy would have run there (the counterfactual, derived from its emissions there "
        "at the cluster's intensity), the difference (+ gained, - lost) and the emissions "
        "there. Avoided emissions are a workload's and the fleet's, not a cluster's.</p>"
    )
    return f"{note}<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _html_rows(rows: Sequence[Row]) -> str:
    body = []
    for row in rows:
        cells = _cells(row)
        avoided = row.totals.avoided_grams
        mark = "good" if avoided > 0 else "bad" if avoided < 0 else ""
        tds = "".join(
            f'<td class="{mark}">{html.escape(c)}</td>' if i in (6, 7) else
            f"<td>{html.escape(c)}</td>" for i, c in enumerate(cells)
        )  # fmt: skip
        body.append(f"<tr>{tds}</tr>")
    head = "".join(f"<th>{html.escape(h)}</th>" for h in HEADERS)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _html_basis(report: Report) -> str:
    esc = html.escape
    rows = "".join(
        f'<tr><td class="l">{esc(_name(r))}</td><td class="l">'
        f'{esc(f"{r.totals.signal}/{r.totals.method}")}</td><td class="l">'
        f"{esc(accounting_basis.label(r.totals, report.window_start, report.generated))}</td></tr>"
        for r in (*report.totals, *report.workloads)
    )
    head = (
        "<th class=l>Object</th><th class=l>Signal/method</th>"
        "<th class=l>Basis (data set, year)</th>"
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def _html_sci(report: Report) -> str:
    esc = html.escape
    rows = "".join(
        "<tr>" + "".join(
            f'<td class="l">{esc(c)}</td>' if i < 2 else f"<td>{esc(c)}</td>"
            for i, c in enumerate(_sci_cells(report, r))
        ) + "</tr>"
        for r in report.workloads
    )  # fmt: skip
    inside = "".join(f"<li>{esc(x)}</li>" for x in accounting_basis.INSIDE)
    outside = "".join(f"<li>{esc(x)}</li>" for x in accounting_basis.OUTSIDE)
    head = "".join(f"<th>{esc(h)}</th>" for h in SCI_HEADERS)
    return (f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"
            f'<p class="note">SCI = (E x I + M) / R. In the boundary:</p><ul>{inside}</ul>'
            f'<p class="note">Out of it:</p><ul>{outside}</ul>')  # fmt: skip


def page(report: Report) -> str:
    """One self-contained HTML page (no script, no external resource)."""
    doc = report.to_json()
    esc = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>carbonshift carbon report</title>",
        f"<style>{STYLE}</style></head><body>",
        "<h1>carbonshift carbon report</h1>",
        f'<p class="window">Every section covers {esc(report.window())}.</p>',
        f'<p class="note">Generated {esc(doc["generated"])}; accounting since '
        f"{esc(doc['accounting_since'] or 'never')}; figures from the "
        f"{esc(report.source)}. {esc(accounting_basis.STATEMENT)} The "
        "counterfactual places the same replicas as the user's own policy would have "
        "without carbonshift.</p>",
    ]
    if report.totals:
        parts += ["<h2>Fleet</h2>", _html_rows(report.totals)]
    parts += ["<h2>Plots</h2>", *plots(report)]
    if report.totals or report.workloads:
        parts += ["<h2>Basis</h2>", _html_basis(report)]
    if report.workloads:
        parts += ["<h2>Workloads</h2>", _html_rows(report.workloads)]
        parts += ["<h2>SCI (ISO/IEC 21031)</h2>", _html_sci(report)]
    if report.clusters:
        parts += ["<h2>Clusters</h2>", _html_clusters(report.clusters)]
    parts.append("<h2>Decision history</h2>")
    if report.history:
        rows = "".join(
            f'<tr><td class="l">{esc(e.to_json()["at"])}</td><td class="l">'
            f'{esc(e.object.replace("//", "/"))}</td><td class="l">{esc(e.what)}</td>'
            f'<td class="l">{esc(e.note)}</td></tr>'
            for e in report.history
        )
        parts.append("<table><thead><tr><th>Time</th><th class=l>Object</th><th class=l>What</th>"
                     "<th class=l>Note</th>"
                     f"</tr></thead><tbody>{rows}</tbody></table>")  # fmt: skip
    else:
        parts.append('<p class="note">No decision recorded in the window.</p>')
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
