"""Answers from memory: what each provider last said per zone, and what the feed answers.

Request handlers read only what is here (through :class:`webhook.feed.IntensityFeed`):
plain dicts, no I/O. A reading whose period ended more than ``max_age`` ago is stale;
the answer for a zone is the first provider in the chain with a non-stale reading, else
the newest reading flagged ``stale=True``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from webhook.feed.history import History, Issues, hour_of, provider_outlook
from webhook.model.intensity import IntensityTable, Reading

if TYPE_CHECKING:
    from webhook.feed.cache import Entry

LATEST = "latest"
FORECAST = "forecast"
HISTORY = "history"
"""Answer kinds: the latest reading, the forecast periods, the past day's readings."""


@dataclasses.dataclass(frozen=True, slots=True)
class ZoneStatus:
    """Everything the feed knows about one zone, for the CLI, logs and ``/readyz``."""

    zone: str
    reading: Reading | None
    """What :meth:`IntensityFeed.get` answers (None: no provider has data)."""
    provider: str | None
    """Name of the provider that answered."""
    problems: Mapping[str, str]
    """Provider name -> why it has no current answer for the zone (last error)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Snapshot:
    """What :meth:`IntensityFeed.get` answers for every zone, frozen at one moment.

    ``generation`` grows whenever the answers change (a new reading arrived or one
    turned stale), so equal generations of one feed mean equal tables.
    """

    table: IntensityTable
    generation: int
    until: datetime
    """Last instant before a held reading turns stale (recomputed after it)."""


class Memory:
    """The last good answers of every provider in the chain (``names``, in order)."""

    def __init__(self, names: Sequence[str], max_age: timedelta) -> None:
        self.names = tuple(names)
        self.max_age = max_age
        # provider name -> zone -> last good answer
        self.latest: dict[str, dict[str, Reading]] = {n: {} for n in self.names}
        self.forecasts: dict[str, dict[str, tuple[Reading, ...]]] = {n: {} for n in self.names}
        self.history = History()
        """Hourly readings observed per provider and zone (day-ahead forecasts)."""
        self.issues = Issues()
        """What each provider forecast per zone in each recent hour (to judge it)."""
        self._fetched: dict[tuple[str, str], datetime] = {}  # when each forecast was fetched
        # zone -> provider name -> last error message (cleared by an answer)
        self.problems: dict[str, dict[str, str]] = {}
        self._changes = 0  # bumped whenever a held reading is replaced
        self._snapshot: tuple[int, Snapshot] | None = None

    def is_stale(self, reading: Reading, now: datetime) -> bool:
        """True once the reading's period ended more than ``max_age`` ago."""
        return now - reading.valid_to > self.max_age

    def answer(self, zone: str, now: datetime) -> tuple[str, Reading] | None:
        """(provider, reading) the feed answers for ``zone``; None if nobody has one."""
        newest: tuple[str, Reading] | None = None
        for name in self.names:
            reading = self.latest[name].get(zone)
            if reading is None:
                continue
            if not self.is_stale(reading, now):
                return name, reading
            if newest is None or reading.valid_to > newest[1].valid_to:
                newest = (name, reading)
        if newest is None:
            return None
        return newest[0], dataclasses.replace(newest[1], stale=True)

    def snapshot(self, now: datetime) -> Snapshot:
        """Every zone's answer; recomputed only after a change or once a reading turned
        stale, so request handlers get it for the cost of a comparison."""
        held = self._snapshot
        if held is not None and held[0] == self._changes and now <= held[1].until:
            return held[1]
        zones = {z for readings in self.latest.values() for z in readings}
        table = {z: a[1] for z in zones if (a := self.answer(z, now)) is not None}
        until = min((t for t in self.turns_stale() if t >= now), default=now + timedelta(hours=1))
        generation = held[1].generation + 1 if held is not None else 1
        snapshot = Snapshot(table, generation, until)
        self._snapshot = (self._changes, snapshot)
        return snapshot

    def turns_stale(self) -> Iterator[datetime]:
        """When each held reading turns stale."""
        for readings in self.latest.values():
            for reading in readings.values():
                yield reading.valid_to + self.max_age

    def forecast(self, zone: str, now: datetime) -> tuple[Reading, ...]:
        """Forecast periods held for the provider that answers ``zone`` (may be empty)."""
        answer = self.answer(zone, now)
        return self.forecasts[answer[0]].get(zone, ()) if answer is not None else ()

    def status(self, zone: str, now: datetime) -> ZoneStatus:
        """The answer for ``zone``, who gave it and why earlier providers did not."""
        answer = self.answer(zone, now)
        problems = dict(self.problems.get(zone, {}))
        if answer is not None:
            # Providers after the one that answered were not needed: not a problem.
            before = self.names[: self.names.index(answer[0])]
            problems = {k: v for k, v in problems.items() if k in before}
        return ZoneStatus(
            zone=zone,
            reading=answer[1] if answer else None,
            provider=answer[0] if answer else None,
            problems=problems,
        )

    def _issued(self, name: str, zone: str) -> None:
        """Keep the forecast held for (provider, zone) as issued in its latest reading's
        hour: what the feed's ``provider`` outlook answers in that hour. A forecast fetched
        after that hour ended is not kept for it (it may know what followed)."""
        latest, periods = self.latest[name].get(zone), self.forecasts[name].get(zone)
        fetched = self._fetched.get((name, zone))
        if latest is None or not periods or fetched is None:
            return
        hour = hour_of(latest.valid_from)
        if fetched >= hour + timedelta(hours=1):
            return
        values = provider_outlook(periods, latest, hour, self.issues.ahead)
        if values is not None:
            self.issues.add(name, zone, hour, values)

    def zones(self) -> set[str]:
        """Every zone something is held for."""
        held = set(self.problems) | self.history.zones()
        for readings in self.latest.values():
            held.update(readings)
        for periods in self.forecasts.values():
            held.update(periods)
        return held

    def forget(self, zone: str) -> None:
        """Drop all that is held for ``zone`` (a zone no longer kept warm): its readings,
        forecasts, hourly history, issued forecasts and problems."""
        for name in self.names:
            self.latest[name].pop(zone, None)
            self.forecasts[name].pop(zone, None)
            self._fetched.pop((name, zone), None)
        self.history.forget(zone)
        self.issues.forget(zone)
        self.problems.pop(zone, None)
        self._changes += 1

    def apply(self, entry: Entry) -> None:
        """Take in a provider's answer: newer readings replace held ones, a failed
        forecast keeps the last good one, errors are remembered as problems."""
        name, zone = entry.provider, entry.zone
        if entry.kind == LATEST and entry.readings:
            held = self.latest[name].get(zone)
            if held is None or entry.readings[0].valid_from >= held.valid_from:
                self.latest[name][zone] = entry.readings[0]
                self.history.add(name, entry.readings[0])
                self._changes += 1
                self._issued(name, zone)
        elif entry.kind == FORECAST and (entry.ok or zone not in self.forecasts[name]):
            self.forecasts[name][zone] = entry.readings
            self._fetched[name, zone] = entry.fetched_at
            self._issued(name, zone)
        elif entry.kind == HISTORY:
            self.history.seed(name, zone, entry.readings)
        if entry.kind == LATEST:
            problems = self.problems.setdefault(zone, {})
            if entry.ok:
                problems.pop(name, None)
            else:
                problems[name] = entry.error or "unknown error"
