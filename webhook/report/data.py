"""What ``carbonshift report`` shows, built from plain data (no I/O).

Inputs, as read from the API server (:mod:`webhook.kube.reads`) or a file:

- ``ledger``: the ``data`` of the leader's ``carbonshift-accounting`` ConfigMap
  (:class:`webhook.decision.ledger.Ledger`): totals per managed object, per signal and
  energy method and per cluster, and the hourly fleet points;
- ``events``: the Events carbonshift recorded (``CarbonRebalanced``,
  ``CarbonReplicasMoved``, ``NodePoolPaused``, ``NodePoolResumed``,
  ``CarbonFieldReleased``, ``IntensityClassChanged``) as ``events.k8s.io/v1`` objects;
- ``objects``: the managed objects, for the ``switches`` their decision annotation keeps.

Figures never add different signals or methods: rows and totals are kept apart per
``signal/method`` (:class:`~webhook.decision.accounting.Totals` refuses to mix them).
"""

from __future__ import annotations

import dataclasses
import datetime
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from webhook.decision.accounting import Method, Totals
from webhook.decision.ledger import Ledger
from webhook.model.intensity import Signal
from webhook.model.objects import mapping
from webhook.model.vocabulary import parse_time
from webhook.report import basis as accounting_basis
from webhook.report.history import Entry, entries

SIGNALS = frozenset(s.value for s in Signal)
METHODS: Mapping[str, Method] = {"coefficient": "coefficient", "kepler": "kepler"}

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhdw])$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def duration(text: str) -> datetime.timedelta:
    """``7d``, ``12h``, ``30m``, ``2w``, ``90s`` as a timedelta (ValueError otherwise)."""
    match = _DURATION.match(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not a duration such as 7d, 12h or 30m")
    return datetime.timedelta(seconds=float(match.group(1)) * _UNIT[match.group(2)])


@dataclasses.dataclass(slots=True)
class Row:
    """One workload (or cluster) for one signal and method."""

    kind: str
    namespace: str
    name: str
    totals: Totals
    moves: int = 0
    replica_hours: float | None = 0.0
    """None when the figures come from Prometheus, which counts no replica-hours."""
    counterfactual_replica_hours: float | None = None
    """A cluster's replica-hours had the user's own policy placed the replicas (None for a
    workload, or when no intensity of the cluster is known to derive it)."""

    @property
    def replica_hours_gained(self) -> float | None:
        """Replica-hours this cluster ran beyond the counterfactual (negative: fewer)."""
        if self.counterfactual_replica_hours is None or self.replica_hours is None:
            return None
        return self.replica_hours - self.counterfactual_replica_hours

    @property
    def intensity(self) -> float | None:
        """Mean intensity the energy ran at (operational grams per kWh)."""
        t = self.totals
        return (t.grams - t.embodied_grams) / t.kwh if t.kwh > 0 else None

    def to_json(self) -> dict[str, Any]:
        t = self.totals
        return {
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "signal": str(t.signal) if t.signal else None,
            "method": t.method,
            "provider": t.provider,
            "energy_kwh": t.kwh,
            "intensity_g_per_kwh": self.intensity,
            "emissions_g": t.grams,
            "embodied_g": t.embodied_grams,
            "counterfactual_g": t.counterfactual_grams,
            "avoided_g": t.avoided_grams,
            "saved_percent": t.saved_percent,
            "moves": self.moves,
            "hours": t.hours,
            "replica_hours": self.replica_hours,
            "counterfactual_replica_hours": self.counterfactual_replica_hours,
            "replica_hours_gained": self.replica_hours_gained,
        }


@dataclasses.dataclass(slots=True)
class Report:
    """Everything the renderers draw."""

    generated: datetime.datetime
    window_start: datetime.datetime
    """Every section covers ``[window_start, generated]``: the figures, the moves, the
    decision history and the plots."""
    accounting_since: datetime.datetime | None
    workloads: list[Row]
    clusters: list[Row]
    totals: list[Row]
    """One row per signal/method: the fleet."""
    history: list[Entry]
    series: list[dict[str, Any]]
    """Hourly fleet points inside the window, oldest first."""
    source: str
    """Where the figures come from (``configmap`` or ``prometheus``)."""
    window_note: str = ""
    """Why the window is not the one ``--since`` asked for (empty when it is)."""

    def window(self) -> str:
        """The window every section covers, in words (the reports' headers)."""
        text = f"{_iso(self.window_start)} to {_iso(self.generated)}"
        return f"{text} ({self.window_note})" if self.window_note else text

    def to_json(self) -> dict[str, Any]:
        return {
            "generated": _iso(self.generated),
            "window": {
                "start": _iso(self.window_start),
                "end": _iso(self.generated),
                "note": self.window_note or None,
            },
            "window_start": _iso(self.window_start),
            "accounting_since": _iso(self.accounting_since) if self.accounting_since else None,
            "source": self.source,
            "basis": {
                "scope": accounting_basis.SCOPE,
                "statement": accounting_basis.STATEMENT,
                "market_based": None,
            },
            "totals": [self._row(r) for r in self.totals],
            "workloads": [self._row(r, sci=True) for r in self.workloads],
            "clusters": [self._row(r) for r in self.clusters],
            "history": [e.to_json() for e in self.history],
            "series": self.series,
        }

    def basis(self, row: Row) -> dict[str, Any]:
        """Scope, signal and each data set with its year for one row's figures."""
        return accounting_basis.basis(row.totals, self.window_start, self.generated)

    def sci(self, row: Row) -> dict[str, Any]:
        """A workload's SCI rate (ISO/IEC 21031) per replica-hour (vCPU-hour for a pool)."""
        return accounting_basis.sci(row.totals, row.replica_hours, row.kind)

    def _row(self, row: Row, *, sci: bool = False) -> dict[str, Any]:
        out = row.to_json()
        out["basis"] = self.basis(row)
        if sci:
            out["sci"] = self.sci(row)
        return out


def _iso(at: datetime.datetime) -> str:
    return at.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _key(kind: str, namespace: str, name: str) -> str:
    return f"{kind}/{namespace}/{name}"


def build(
    ledger_data: Mapping[str, str] | None,
    events: Iterable[Mapping[str, Any]],
    objects: Iterable[Mapping[str, Any]],
    *,
    now: datetime.datetime,
    since: datetime.timedelta,
    reasons: Collection[str],
) -> Report:
    """The report over ``[now - since, now]``, every section over the same window.

    The per-workload and per-cluster figures are the ledger's totals, which run since
    accounting began and are not kept per hour: when accounting began before ``now -
    since`` the window widens to when it began (and the report says why), and the moves,
    the history and the plots follow it. :func:`overlay` cuts it back to ``since``."""
    ledger = Ledger.from_data(ledger_data)
    start, note = now - since, ""
    if ledger.objects and ledger.since is not None and ledger.since < start:
        start = ledger.since
        note = (
            f"since accounting began: the ledger's totals cannot be cut to the last "
            f"{_span(since)}; --prometheus URL gives figures over --since"
        )
    history = [e for e in entries(events, objects, reasons) if e.at >= start]
    moves = _moves(history)
    workloads: list[Row] = []
    clusters: dict[tuple[str, str], Row] = {}
    fleet: dict[str, Row] = {}
    mean_intensity = _mean_intensities(ledger.series)
    for text, held in sorted(ledger.objects.items()):
        kind, _, rest = text.partition("/")
        namespace, _, name = rest.partition("/")
        for label, totals in sorted(held.totals.items()):
            workloads.append(
                Row(kind, namespace, name, totals, moves.get(text, 0),
                    sum(p.get("rh", 0.0) for p in held.places.values()))
            )  # fmt: skip
            fleet.setdefault(label, Row("fleet", "", "all", Totals())).totals.merge(totals)
        first = next(iter(sorted(held.totals)), None)
        if first is None or kind == "NodePool":
            continue  # NodePool places are topology zones, not member clusters
        only = held.totals[first]
        rows = sum(p.get("rh", 0.0) for p in held.places.values())
        kwh_per_rh = sum(p.get("kwh", 0.0) for p in held.places.values()) / rows if rows else 0.0
        for place, numbers in held.places.items():
            row = clusters.setdefault(
                (place, first), Row("Cluster", "", place, Totals(only.signal, only.method))
            )
            part = Totals(
                signal=only.signal,
                method=only.method,
                provider=only.provider,
                kwh=numbers.get("kwh", 0.0),
                grams=numbers.get("g", 0.0),
                counterfactual_grams=numbers.get("cf_g", 0.0),
            )
            row.totals.merge(part)
            row.replica_hours = (row.replica_hours or 0.0) + numbers.get("rh", 0.0)
            counterfactual_rh = _counterfactual_rh(numbers, kwh_per_rh, mean_intensity.get(place))
            if counterfactual_rh is not None:
                row.counterfactual_replica_hours = (
                    row.counterfactual_replica_hours or 0.0
                ) + counterfactual_rh
    for row in fleet.values():
        row.moves = sum(moves.values())
    series = [p for p in ledger.series if _in_window(p, start)]
    return Report(
        generated=now,
        window_start=start,
        accounting_since=ledger.since,
        workloads=workloads,
        clusters=[clusters[k] for k in sorted(clusters)],
        totals=[fleet[k] for k in sorted(fleet)],
        history=history,
        series=series,
        source="configmap",
        window_note=note,
    )


def _span(since: datetime.timedelta) -> str:
    """A duration as ``--since`` writes it (``7d``, ``36h``, ``90m``, ``45s``)."""
    seconds = since.total_seconds()
    for unit in ("d", "h", "m"):
        if seconds >= _UNIT[unit] and seconds % _UNIT[unit] == 0:
            return f"{int(seconds // _UNIT[unit])}{unit}"
    return f"{seconds:g}s"


def _moves(history: Iterable[Entry]) -> dict[str, int]:
    """Moves per object (``kind/namespace/name``) in the history."""
    moves: dict[str, int] = {}
    for entry in history:
        if entry.move:
            moves[entry.object] = moves.get(entry.object, 0) + 1
    return moves


def _mean_intensities(series: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Each cluster's mean intensity over the ledger's hourly points."""
    sums: dict[str, list[float]] = {}
    for point in series:
        for name, value in mapping(point, "i").items():
            if isinstance(value, int | float):
                sums.setdefault(str(name), []).append(float(value))
    return {name: sum(values) / len(values) for name, values in sums.items()}


def _counterfactual_rh(
    numbers: Mapping[str, float], kwh_per_rh: float, fallback_intensity: float | None
) -> float | None:
    """The replica-hours the counterfactual placed in one cluster: its counterfactual grams
    there at the grams one replica-hour emitted there (a replica needs the same energy
    wherever it runs, and both placements are counted at the same intensity per interval).
    A cluster the replicas never ran in takes its mean intensity from the hourly points."""
    counterfactual = numbers.get("cf_g", 0.0)
    if counterfactual == 0:
        return 0.0
    rh, grams = numbers.get("rh", 0.0), numbers.get("g", 0.0)
    if rh > 0 and grams > 0:
        return counterfactual / (grams / rh)
    if kwh_per_rh > 0 and fallback_intensity:
        return counterfactual / (kwh_per_rh * fallback_intensity)
    return None


def _in_window(point: Mapping[str, Any], start: datetime.datetime) -> bool:
    try:
        return parse_time(str(point.get("t"))) > start - datetime.timedelta(hours=1)
    except ValueError:
        return False


def overlay(
    report: Report,
    increases: Mapping[tuple[str, str, str, str, str], Sequence[float]],
    *,
    start: datetime.datetime,
) -> None:
    """Replace the workloads' totals by what Prometheus counted in the window from
    ``start``: ``(kind, namespace, name, signal, method) -> (kWh, grams, counterfactual
    grams)``, and cut every section to that window. A workload Prometheus counted that the
    ledger does not hold (its ConfigMap lost or unwritable) gets a row of its own, one it
    did not count counted nothing; the fleet is the sum of the workloads, and the clusters,
    which the ledger keeps only since accounting began, are left out."""
    seen = set()
    for row in report.workloads:
        t = row.totals
        key = (row.kind, row.namespace, row.name, str(t.signal), str(t.method))
        seen.add(key)
        kwh, grams, counterfactual = increases.get(key, (0.0, 0.0, 0.0))[:3]
        row.totals = Totals(t.signal, t.method, t.provider, kwh=kwh, grams=grams,
                            counterfactual_grams=counterfactual)  # fmt: skip
        row.replica_hours = None  # the ledger's run since accounting began
    for key, (kwh, grams, counterfactual, *_) in sorted(increases.items()):
        kind, namespace, name, signal, method = key
        if key in seen or signal not in SIGNALS or method not in METHODS:
            continue
        totals = Totals(
            Signal(signal),
            METHODS[method],
            kwh=kwh,
            grams=grams,
            counterfactual_grams=counterfactual,
        )
        report.workloads.append(Row(kind, namespace, name, totals))
    report.history = [e for e in report.history if e.at >= start]
    report.series = [p for p in report.series if _in_window(p, start)]
    moves = _moves(report.history)
    fleet: dict[str, Row] = {}
    for row in report.workloads:
        row.moves = moves.get(_key(row.kind, row.namespace, row.name), 0)
        t = row.totals
        label = f"{t.signal}/{t.method}"
        fleet.setdefault(label, Row("fleet", "", "all", Totals())).totals.merge(t)
    for row in fleet.values():
        row.moves = sum(moves.values())
    report.totals = [fleet[k] for k in sorted(fleet)]
    report.clusters = []
    report.window_start = start
    report.window_note = (
        "per-cluster figures left out: the ledger keeps them only since accounting began"
    )
    report.source = "prometheus"
