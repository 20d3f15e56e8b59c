"""Which forecast ranks a zone's hours better: the provider's own or the day-ahead profile.

Decisions that wait (the NodePool pause, the ladder, the Kueue carbon window) act on which
hours of their window the forecast says are greenest, so forecasters are judged on how they
rank the hours (:mod:`webhook.decision.forecast_quality`), not on their mean error. For the
provider answering a zone, on what the feed kept:

- the provider's forecasts: one issue per hour of the last
  :data:`~webhook.feed.history.JUDGE_DAYS` days (:class:`~webhook.feed.history.Issues`);
- the profile's forecasts: recomputed for each of those hours from the hourly history
  before it (:func:`webhook.decision.forecast.outlook`, which sees only the past);
- the truth: the hourly history after it.

A window is an hour ``t`` of those days whose ``t .. t + window`` hours have all been
observed (the current hour, still open, is not judged). Each forecaster is measured over
the windows it forecast; the choice compares the two on the windows both forecast
(:func:`~webhook.decision.forecast_quality.prefer_provider`: at least
:data:`~webhook.decision.forecast_quality.MIN_WINDOWS` of them and a clearly higher mean
Spearman; ties and too little evidence keep the profile, the default forecaster).

A judgement changes only when a new hour is observed, so :class:`Judge` keeps each until
then: the feed's ``outlook`` answers from memory. Plain data, no I/O, no clock.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime

from webhook.decision.forecast import Method, history_needed, outlook
from webhook.decision.forecast_quality import (
    Quality,
    Score,
    prefer_provider,
    score,
    summed,
)
from webhook.feed.history import HOUR, JUDGE_DAYS, PROFILE_DAYS, PROVIDER, enough
from webhook.feed.memory import Memory

PROFILE = Method.PROFILE.value
"""The profile forecaster's name (the default: ``day-ahead-profile``)."""
BEST = "best"
"""Outlook method: the forecaster that ranked the zone's hours better (:class:`Judge`)."""
FORECASTERS = (PROFILE, PROVIDER)
WINDOW_HOURS = 24
"""The window the metrics and ``carbonshift intensity`` report (a day ahead: the longest
``max-pause`` the NodePool outlook reads, the placements' 24 h mean)."""
CACHED = 256
"""At most this many judgements are kept (one per provider, zone and window asked)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Judgement:
    """How the forecasters ranked one zone's hours, and which one ``best`` uses."""

    zone: str
    provider: str
    """The provider whose forecasts and history were judged (the one answering the zone)."""
    window_hours: int
    quality: Mapping[str, Quality]
    """Forecaster (:data:`FORECASTERS`) -> its measure over the windows it forecast."""
    compared: tuple[Quality, Quality]
    """(profile, provider) over the windows both forecast: what the choice rests on."""
    chosen: str
    """:data:`PROFILE` or :data:`~webhook.feed.history.PROVIDER`."""


def _hours(series: Sequence[float], window: int, keep_hours: int) -> range:
    """Indexes into ``series`` of the hours that begin a judged window: in the last
    ``keep_hours`` hours, with every hour of the window observed and complete."""
    if window < 1:
        raise ValueError(f"window must be >= 1 hour, got {window}")
    last = len(series) - 2  # the newest complete hour
    return range(max(0, len(series) - keep_hours), last - window + 1)


def _scores(
    first: datetime,
    series: Sequence[float],
    issues: Mapping[datetime, Sequence[float]],
    i: int,
    *,
    window: int,
    days: int,
) -> tuple[Score | None, Score | None]:
    """The profile's and the provider's score of the window beginning at ``series[i]``
    (None: that forecaster had no forecast then)."""
    truth = series[i : i + window + 1]
    profile = given = None
    if i + 1 >= enough(Method.PROFILE, window):
        past = series[max(0, i + 1 - history_needed(Method.PROFILE, window, days=days)) : i + 1]
        profile = score(outlook(Method.PROFILE, past, window, days=days), truth)
    issue = issues.get(first + i * HOUR)
    if issue is not None and len(issue) > window:
        given = score(issue[: window + 1], truth)
    return profile, given


def _judgement(
    zone: str,
    provider: str,
    window: int,
    profile: Mapping[datetime, Score],
    given: Mapping[datetime, Score],
) -> Judgement:
    both = profile.keys() & given.keys()
    compared = (summed(profile[t] for t in both), summed(given[t] for t in both))
    return Judgement(
        zone,
        provider,
        window,
        {PROFILE: summed(profile.values()), PROVIDER: summed(given.values())},
        compared,
        PROVIDER if prefer_provider(*compared) else PROFILE,
    )


def judge(
    zone: str,
    provider: str,
    first: datetime | None,
    series: Sequence[float],
    issues: Mapping[datetime, Sequence[float]],
    *,
    window: int,
    keep_hours: int = JUDGE_DAYS * 24,
    days: int = PROFILE_DAYS,
) -> Judgement:
    """Judge both forecasters on ``series`` (hourly, the first at ``first``, the last the
    current hour) and ``issues`` (the provider's, by issue hour) over windows of
    ``window`` hours ahead beginning in the last ``keep_hours`` hours."""
    profile: dict[datetime, Score] = {}
    given: dict[datetime, Score] = {}
    hours = _hours(series, window, keep_hours)
    if first is not None:
        for i in hours:
            p, g = _scores(first, series, issues, i, window=window, days=days)
            if p is not None:
                profile[first + i * HOUR] = p
            if g is not None:
                given[first + i * HOUR] = g
    return _judgement(zone, provider, window, profile, given)


@dataclasses.dataclass(slots=True)
class _Kept:
    """One (provider, zone, window)'s window scores so far and its last judgement."""

    first: datetime
    stamp: tuple[datetime, int]
    judgement: Judgement
    profile: dict[datetime, Score] = dataclasses.field(default_factory=dict)
    given: dict[datetime, Score] = dataclasses.field(default_factory=dict)
    seen: set[datetime] = dataclasses.field(default_factory=set)


class Judge:
    """The :class:`Judgement` of each (provider, zone, window) over ``memory``, kept until
    a new hour is observed. A window's scores never change once all its hours are
    observed, so each new hour scores one new window per forecaster and forgets the
    oldest: judging stays cheap for the refresher and the outlook."""

    def __init__(self, memory: Memory, *, days: int = PROFILE_DAYS) -> None:
        self.memory = memory
        self.days = days
        self._held: dict[tuple[str, str, int], _Kept] = {}

    def judgement(self, provider: str, zone: str, window: int) -> Judgement:
        """How the provider's forecasts and the profile ranked ``zone``'s hours."""
        first, series = self.memory.history.timeline(provider, zone)
        hours = _hours(series, window, JUDGE_DAYS * 24)
        if first is None:
            return _judgement(zone, provider, window, {}, {})
        key = (provider, zone, window)
        stamp = (first, len(series))
        kept = self._held.get(key)
        if kept is not None and kept.stamp == stamp:
            return kept.judgement
        if kept is None or first < kept.first:  # new, or older hours were filled in
            if len(self._held) >= CACHED:
                self._held.clear()
            kept = _Kept(first, stamp, _judgement(zone, provider, window, {}, {}))
            self._held[key] = kept
        issues = self.memory.issues.held(provider, zone)
        oldest = first + hours.start * HOUR
        for i in hours:
            at = first + i * HOUR
            if at in kept.seen:
                continue
            kept.seen.add(at)
            p, g = _scores(first, series, issues, i, window=window, days=self.days)
            if p is not None:
                kept.profile[at] = p
            if g is not None:
                kept.given[at] = g
        for held in (kept.profile, kept.given):
            for at in [t for t in held if t < oldest]:
                del held[at]
        kept.seen = {t for t in kept.seen if t >= oldest}
        kept.first, kept.stamp = first, stamp
        kept.judgement = _judgement(zone, provider, window, kept.profile, kept.given)
        return kept.judgement
