"""What the leader's carbon accounting persists: the ledger (the accounting ConfigMap's
``data``), one :class:`ObjectTotals` per managed object, and the hourly fleet series the
report plots. Written by :mod:`webhook.controllers.accounting`, read by
:mod:`webhook.report`."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
from collections.abc import Mapping
from typing import Any

import orjson

from webhook.decision.accounting import Interval, Totals
from webhook.model.objects import text
from webhook.model.vocabulary import format_time, parse_time

SERIES_HOURS = 14 * 24
"""Hourly fleet points kept for the report's plots (two weeks)."""
LEDGER_LABELS = {
    "app.kubernetes.io/managed-by": "carbonshift",
    "carbonshift.io/ledger": "accounting",
}
"""The labels of the accounting ConfigMap: ``carbonshift report`` finds it by them in
whichever namespace the leader keeps it."""

ObjectKey = tuple[str, str, str]
"""(kind, namespace, name); namespace "" when cluster-scoped."""


def key_text(key: ObjectKey) -> str:
    return "/".join(key)


def parse_key(text: str) -> ObjectKey | None:
    parts = text.split("/")
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 else None


@dataclasses.dataclass(slots=True)
class ObjectTotals:
    """One managed object's sums: per ``signal/method`` and per cluster (or zone)."""

    totals: dict[str, Totals] = dataclasses.field(default_factory=dict)
    places: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)
    """place -> ``kwh``, ``g`` (operational grams there), ``cf_g`` (counterfactual grams
    there), ``rh`` (replica-hours, or vCPU-hours for a NodePool)."""

    def add(self, interval: Interval, hours: float, counts: Mapping[str, float]) -> Totals:
        """Add an interval; the totals it went to."""
        actual = interval.actual
        label = f"{actual.signal}/{actual.method}"
        totals = self.totals.setdefault(label, Totals())
        totals.add(interval, hours)
        replicas = sum(counts.values())
        kwh_each = actual.kwh / replicas if replicas else 0.0
        for place, n in counts.items():
            row = self._row(place)
            row["kwh"] += n * kwh_each
            row["rh"] += n * hours
        for place, grams in actual.by_place.items():
            self._row(place)["g"] += grams
        for place, grams in interval.counterfactual.by_place.items():
            self._row(place)["cf_g"] += grams
        return totals

    def _row(self, place: str) -> dict[str, float]:
        return self.places.setdefault(place, {"kwh": 0.0, "g": 0.0, "cf_g": 0.0, "rh": 0.0})

    def to_json(self) -> dict[str, Any]:
        return {
            "totals": {k: t.to_json() for k, t in sorted(self.totals.items())},
            "places": {p: {k: round(v, 9) for k, v in r.items()} for p, r in self.places.items()},
        }

    @classmethod
    def from_json(cls, data: object) -> ObjectTotals:
        if not isinstance(data, Mapping):
            return cls()
        totals = data.get("totals")
        places = data.get("places")
        return cls(
            totals={str(k): Totals.from_json(v) for k, v in totals.items()}
            if isinstance(totals, Mapping)
            else {},
            places={
                str(p): {str(k): float(v) for k, v in r.items() if isinstance(v, int | float)}
                for p, r in places.items()
                if isinstance(r, Mapping)
            }
            if isinstance(places, Mapping)
            else {},
        )


@dataclasses.dataclass(slots=True)
class Ledger:
    """Everything the leader persists."""

    objects: dict[str, ObjectTotals] = dataclasses.field(default_factory=dict)
    series: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """Hourly fleet points, oldest first: ``t`` (hour), ``i`` (cluster -> gCO2eq/kWh),
    ``r`` (cluster -> replicas), ``g``/``c`` (signal -> grams, counterfactual grams, of
    that hour)."""
    last: datetime.datetime | None = None
    since: datetime.datetime | None = None

    def to_data(self) -> dict[str, str]:
        """ConfigMap ``data``."""
        meta = {
            "last": precise(self.last) if self.last else None,
            "since": precise(self.since) if self.since else None,
            "version": 1,
        }
        totals = {k: o.to_json() for k, o in sorted(self.objects.items())}
        return {
            "meta.json": orjson.dumps(meta).decode(),
            "totals.json": orjson.dumps(totals).decode(),
            "series.json": orjson.dumps(self.series[-SERIES_HOURS:]).decode(),
        }

    @classmethod
    def from_data(cls, data: Mapping[str, str] | None) -> Ledger:
        """Read a ConfigMap's ``data`` (None: no ConfigMap); what is unreadable starts
        afresh."""

        def load(name: str) -> Any:
            try:
                return orjson.loads(text(data, name) or "null")
            except orjson.JSONDecodeError:
                return None

        meta, totals, series = load("meta.json"), load("totals.json"), load("series.json")
        ledger = cls()
        if isinstance(totals, Mapping):
            ledger.objects = {str(k): ObjectTotals.from_json(v) for k, v in totals.items()}
        if isinstance(series, list):
            ledger.series = [p for p in series if isinstance(p, dict) and "t" in p]
        if isinstance(meta, Mapping):
            for field in ("last", "since"):
                with contextlib.suppress(ValueError):
                    setattr(ledger, field, parse_time(str(meta.get(field))))
        return ledger

    def point(self, at: datetime.datetime) -> dict[str, Any]:
        """The hourly point ``at`` falls in (created at the end when new)."""
        hour = format_time(at.replace(minute=0, second=0, microsecond=0))
        if not self.series or self.series[-1].get("t") != hour:
            self.series.append({"t": hour, "i": {}, "r": {}, "g": {}, "c": {}})
            del self.series[:-SERIES_HOURS]
        return self.series[-1]


def precise(at: datetime.datetime) -> str:
    """RFC 3339 with microseconds (what :func:`parse_time` reads): a new leader counts
    from exactly where the last pass ended, not from the second before it."""
    return at.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
