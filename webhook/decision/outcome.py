"""What a decision returns: the changes to make, warnings, and the record to store."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from webhook.decision import reason
from webhook.decision.record import Record, unchanged_text
from webhook.model.intensity import IntensityTable, Reading
from webhook.model.objects import EMPTY, meta_of
from webhook.model.vocabulary import DECISION, REASON, UNREAD, Scope, format_time, unread


class _Remove:
    """Marker value: the field at this path must be removed."""

    def __repr__(self) -> str:
        return "REMOVE"


REMOVE: Final = _Remove()

Path = tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class Change:
    """Set (or remove, with :data:`REMOVE`) the value at ``path`` in the object."""

    path: Path
    value: Any


@dataclasses.dataclass(slots=True)
class Decision:
    """The outcome of deciding on one object. No changes means: let it through as is."""

    changes: list[Change] = dataclasses.field(default_factory=list)
    warnings: list[str] = dataclasses.field(default_factory=list)
    skipped: str | None = None
    """Why nothing was decided (not opted in, unsupported operation...), if so."""
    record: Record | None = None
    """The decision annotation that goes with the changes."""


def short(text: str, limit: int = 119) -> str:
    """Admission warnings should stay under 120 characters."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclasses.dataclass(frozen=True, slots=True)
class Lookup:
    """The intensities a decision used, with the facts the record and warnings need."""

    values: Mapping[str, float | None]
    """Candidate -> intensity (None: unknown zone or no data)."""
    readings: Mapping[str, Reading]
    """Candidate -> the reading behind its value."""
    zones: Mapping[str, str | None]

    def warnings(self) -> list[str]:
        """Short warnings for unknown, stale and mixed data."""
        out = []
        unknown = sorted(n for n, v in self.values.items() if v is None)
        if unknown:
            out.append(short(f"carbonshift: no intensity data for {', '.join(unknown)}"))
        stale = sorted(n for n, r in self.readings.items() if r.stale)
        if stale:
            out.append(short(f"carbonshift: stale intensity data for {', '.join(stale)}"))
        if len({r.signal for r in self.readings.values()}) > 1:
            out.append("carbonshift: mixing average and marginal intensity signals")
        return out

    def body(self, weights: Mapping[str, int] | None = None) -> dict[str, Any]:
        """The human-facing part of the decision record."""
        readings, zones = self.readings, self.zones
        sources = sorted({r.source for r in readings.values()})
        times = [r.valid_from for r in readings.values()]
        clusters: dict[str, Any] = {}
        weighed = weights or EMPTY
        for name, value in self.values.items():
            reading = readings.get(name)
            g = _tenths(value) if value is not None else None
            if reading is None:
                entry: dict[str, Any] = {"zone": zones.get(name), "g": g}
            elif reading.stale:
                entry = {"zone": zones.get(name), "g": g, "est": reading.estimated, "stale": True}
            else:
                entry = {"zone": zones.get(name), "g": g, "est": reading.estimated}
            if name in weighed:
                entry["w"] = weighed[name]
            clusters[name] = entry
        return {
            "provider": ",".join(sources) or None,
            "at": iso(max(times)) if times else None,
            "clusters": clusters,
        }


@functools.lru_cache(maxsize=1024, typed=True)
def _tenths(value: float) -> float:
    """``round(value, 1)``, kept for the last 1024 values (an int and a float apart): every
    record a pass writes holds the same few readings, and rounding to a decimal place is
    slow. A number is immutable, so a kept answer is the answer."""
    return round(value, 1)


def lookup(zones: Mapping[str, str | None], table: IntensityTable) -> Lookup:
    """Resolve each name's zone to a reading from the in-memory table."""
    values: dict[str, float | None] = {}
    readings: dict[str, Reading] = {}
    for name, zone in zones.items():
        reading = table.get(zone) if zone else None
        values[name] = reading.value if reading is not None else None
        if reading is not None:
            readings[name] = reading
    return Lookup(values=values, readings=readings, zones=zones)


def iso(when: datetime) -> str:
    """UTC timestamp as the decision record writes it (``2026-01-01T12:00:00Z``)."""
    return format_time(when)


@dataclasses.dataclass(frozen=True, slots=True)
class Stored:
    """What the webhook writes for a decision: the decider's changes and, when there is
    anything to say, its decision annotation."""

    changes: tuple[Change, ...]
    annotation: str | None = None
    """The decision annotation written (None: none)."""


def stored(obj: Mapping[str, Any], decision: Decision, scope: Scope) -> Stored:
    """What the webhook stores for ``decision`` on ``obj`` (admission, the simulator and
    the tests all build it here): the decider's changes, and the decision record with
    every change, or alone when carbonshift left a rule unapplied (``left``) or a
    ``carbonshift.io/*`` key of ``scope`` unread (or no longer): the object itself then
    says why. An unchanged record keeps the annotation text already stored."""
    changes = list(decision.changes)
    record = decision.record
    if record is None:
        return Stored(tuple(changes))
    before = meta_of(obj).annotations.get(DECISION)
    # A new record, never an edit of the one read (a kept decision's is the stored one).
    body = {k: v for k, v in record.body.items() if k != UNREAD}
    if unread_keys := unread(meta_of(obj).annotations, scope):
        body[UNREAD] = unread_keys
    record = decision.record = Record(body=body, orig=dict(record.orig), own=dict(record.own))
    keys = UNREAD in record.body or UNREAD in Record.decode(before).body
    if not (changes or record.left or keys):
        return Stored(tuple(changes))
    annotation = unchanged_text(before, record.encode())
    changes.extend(recorded(obj, record, annotation))
    return Stored(tuple(changes), annotation)


def recorded(obj: Mapping[str, Any], record: Record, text: str | None = None) -> list[Change]:
    """The changes that store ``record`` on ``obj``: the decision annotation (``text``,
    by default the record encoded) and, beside it, the record in words
    (``carbonshift.io/reason``, :func:`webhook.decision.reason.line`). Every writer of a
    record writes both, so they never disagree."""
    kind = obj.get("kind")
    return [
        Change(("metadata", "annotations", DECISION), record.encode() if text is None else text),
        Change(
            ("metadata", "annotations", REASON),
            reason.line(kind if isinstance(kind, str) else "", record),
        ),
    ]
