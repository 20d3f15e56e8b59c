"""What every figure of the report rests on, and the SCI rate per workload.

Every emission and avoided-emission figure carbonshift counts is **location-based**: the
energy a replica used times the grid intensity of the zone it ran in, as the feed answered
it (the annual table, a trace, or a provider's hourly figure). No market-based figure
(contracts, RECs, PPAs, supplier factors) enters them, so the two are never mixed. The
basis names the data set and year of the intensities: an annual table row carries its year
(``static:electricitymaps-2025-lifecycle``), a trace file its year, and a provider's live
hourly figures the years of the hours accounted.

The SCI (Software Carbon Intensity, ISO/IEC 21031:2024) rate of a workload is
``(E x I + M) / R``: operational emissions (energy x location-based intensity) plus
embodied emissions (when ``accounting.embodied_g_per_vcpu_hour`` is set), per functional
unit ``R``, a replica-hour (a vCPU-hour for a NodePool, whose ledger counts vCPU-hours).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Sequence
from typing import Any

from webhook.decision.accounting import Totals

SCOPE = "location-based"
"""The only accounting basis carbonshift has: grid intensity where the energy was used."""

STATEMENT = (
    "Figures are location-based grid averages (energy x the intensity of the zone it ran in, "
    "from the data set and year named); no market-based figure (contracts, RECs, PPAs) is "
    "mixed in."
)

INSIDE = (
    "operational electricity of the workload's replicas (coefficient estimate or Kepler "
    "measurement, times accounting.pue)",
    "location-based grid intensity of each replica's zone, per accounting interval",
    "embodied hardware emissions per vCPU-hour, when accounting.embodied_g_per_vcpu_hour is set",
)
OUTSIDE = (
    "market-based instruments (contracts, RECs, PPAs, offsets): SCI does not net them",
    "avoided emissions: the counterfactual is reported beside SCI, never subtracted from it",
    "networking, storage, the control plane and idle capacity no replica uses",
    "embodied emissions when accounting.embodied_g_per_vcpu_hour is not set",
)

_YEAR = re.compile(r"(?<!\d)(20\d\d)(?!\d)")


def _years(start: datetime.datetime, end: datetime.datetime) -> str:
    first, last = start.year, end.year
    return str(first) if first == last else f"{first}-{last}"


def data_sets(
    provider: str, start: datetime.datetime, end: datetime.datetime
) -> list[dict[str, str]]:
    """Each intensity source of a figure with its year: the year its name carries (an
    annual table row, a trace file), else the years of the hours accounted."""
    out = []
    for source in sorted({s for s in provider.split(",") if s}):
        found = _YEAR.search(source)
        out.append({"source": source, "year": found.group(1) if found else _years(start, end)})
    return out


def basis(totals: Totals, start: datetime.datetime, end: datetime.datetime) -> dict[str, Any]:
    """The basis of one row's figures: scope, signal and data sets with their years."""
    return {
        "scope": SCOPE,
        "signal": str(totals.signal) if totals.signal else None,
        "data_sets": data_sets(totals.provider, start, end),
    }


def label(totals: Totals, start: datetime.datetime, end: datetime.datetime) -> str:
    """``location-based average, static:electricitymaps-2025-lifecycle (2025)``."""
    sets = data_sets(totals.provider, start, end)
    named = ", ".join(f"{d['source']} ({d['year']})" for d in sets) or "no data set recorded"
    signal = f" {totals.signal}" if totals.signal else ""
    return f"{SCOPE}{signal}, {named}"


def functional_unit(kind: str) -> str:
    """What SCI's R counts for an object of this kind."""
    return "vCPU-hour" if kind == "NodePool" else "replica-hour"


def sci(totals: Totals, units: float | None, kind: str) -> dict[str, Any]:
    """SCI = (E x I + M) / R for one workload row; ``rate`` None without units."""
    operational = totals.grams - totals.embodied_grams
    rate = totals.grams / units if units else None
    return {
        "standard": "ISO/IEC 21031:2024 (SCI)",
        "functional_unit": functional_unit(kind),
        "units": units,
        "operational_g": operational,
        "embodied_g": totals.embodied_grams,
        "rate_g_per_unit": rate,
        "scope": SCOPE,
        "boundary": {"in": list(INSIDE), "out": list(OUTSIDE)},
    }


def boundary_lines() -> Sequence[str]:
    """The SCI boundary as the text report prints it."""
    return [
        "  in:  " + INSIDE[0],
        *("       " + line for line in INSIDE[1:]),
        "  out: " + OUTSIDE[0],
        *("       " + line for line in OUTSIDE[1:]),
    ]
