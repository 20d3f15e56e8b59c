"""The decision history: carbonshift's Events and the switches in decision annotations."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from webhook.decision.accounting import record_of
from webhook.decision.record import switches
from webhook.model.objects import dig, mapping, meta_of
from webhook.model.vocabulary import parse_time

MOVES = frozenset({"CarbonRebalanced", "CarbonReplicasMoved", "switch"})


@dataclasses.dataclass(frozen=True, slots=True)
class Entry:
    """One line of the audit log."""

    at: datetime.datetime
    object: str
    """``kind/namespace/name``."""
    what: str
    """The Event's reason, or ``switch`` (from a decision annotation)."""
    note: str

    @property
    def move(self) -> bool:
        return self.what in MOVES

    def to_json(self) -> dict[str, Any]:
        return {
            "at": self.at.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "object": self.object,
            "what": self.what,
            "note": self.note,
        }


def _when(*values: object) -> datetime.datetime | None:
    for value in values:
        if isinstance(value, str) and value:
            try:
                return parse_time(value)
            except ValueError:
                continue
    return None


def entries(
    events: Iterable[Mapping[str, Any]],
    objects: Iterable[Mapping[str, Any]],
    reasons: Collection[str],
) -> list[Entry]:
    """The audit log, oldest first: carbonshift's Events (those whose reason is one of
    ``reasons``: :data:`webhook.integrations.EVENT_REASONS`), and every switch a decision
    annotation keeps that no ``CarbonRebalanced`` Event tells already (Events expire after
    an hour by default; the annotation keeps the last five switches)."""
    out: list[Entry] = []
    told: set[tuple[str, str]] = set()
    for event in events:
        reason = str(event.get("reason") or "")
        if reason not in reasons:
            continue
        regarding = mapping(event, "regarding") or mapping(event, "involvedObject")
        at = _when(
            event.get("eventTime"),
            event.get("deprecatedLastTimestamp"),
            event.get("lastTimestamp"),
            dig(event, "metadata", "creationTimestamp"),
        )
        if at is None:
            continue
        who = f"{regarding.get('kind')}/{regarding.get('namespace') or ''}/{regarding.get('name')}"
        note = str(event.get("note") or event.get("message") or "")
        out.append(Entry(at, who, reason, note))
        if reason == "CarbonRebalanced":
            told.add((who, at.strftime("%Y-%m-%dT%H:%M")))
    for obj in objects:
        meta = meta_of(obj)
        who = f"{obj.get('kind')}/{meta.namespace}/{meta.name}"
        for switch in switches(record_of(obj)):
            at = _when(switch.get("t"))
            if at is None or (who, at.strftime("%Y-%m-%dT%H:%M")) in told:
                continue
            if "pause" in switch:
                note = f"carbonshift: {switch['pause']}"
            else:
                note = f"placement {switch.get('from')} -> {switch.get('to')}"
                if "before" in switch and "after" in switch:
                    note += f": expected intensity {switch['before']} -> {switch['after']} g/kWh"
            out.append(Entry(at, who, "switch", note))
    return sorted(out, key=lambda e: (e.at, e.object, e.what))
