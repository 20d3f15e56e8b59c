"""Which forecast ranks a zone's hours best: the provider's own, the day-ahead profile or
the seasonal forecaster.

Decisions that wait (the NodePool pause, the ladder, the Kueue carbon window) act on which
hours of their window the forecast says are greenest, so forecasters are judged on how they
rank the hours (:mod:`webhook.decision.forecast_quality`), not on their mean error. For the
provider answering a zone, on what the feed kept:

- the provider's forecasts: one issue per hour of the last
  :data:`~webhook.feed.history.JUDGE_DAYS` days (:class:`~webhook.feed.history.Issues`);
- the profile's and the seasonal forecaster's: recomputed for each of those hours from the
  hourly history before it (:func:`webhook.decision.forecast.outlook`, which sees only the
  past; the seasonal one only where its library, the ``forecast`` extra, is installed);
- the truth: the hourly history after it.

A window is an hour ``t`` of those days whose ``t .. t + window`` hours have all been
observed (the current hour, still open, is not judged). Each forecaster is measured over
the windows it forecast; the choice compares them on the windows every forecaster that
forecast any forecast (:func:`~webhook.decision.forecast_quality.choose`: at least
:data:`~webhook.decision.forecast_quality.MIN_WINDOWS` of them and a clearly higher mean
Spearman than the profile's; ties and too little evidence keep the profile, the default
forecaster).

A judgement changes only when a new hour is observed, so :class:`Judge` keeps each until
then: the feed's ``outlook`` answers from memory. Plain data, no I/O, no clock.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime

from webhook.decision.forecast import Method, history_needed, offered, outlook
from webhook.decision.forecast_quality import (
    NO_WINDOWS,
    Quality,
    Score,
    Spread,
    choose,
    score,
    summed,
)
from webhook.feed.history import HOUR, JUDGE_DAYS, PROFILE_DAYS, PROVIDER, enough, epoch_hour
from webhook.feed.memory import Memory

PROFILE = Method.PROFILE.value
"""The profile forecaster's name (the default: ``day-ahead-profile``)."""
BEST = "best"
"""Outlook method: the forecaster that ranked the zone's hours better (:class:`Judge`)."""
SEASONAL = Method.SEASONAL.value
"""The seasonal forecaster's name (:mod:`webhook.decision.seasonal`)."""
FORECASTERS = (PROFILE, SEASONAL, PROVIDER)
"""Every forecaster judged, in the order reports list them; the seasonal one is judged on
no window where its library is not installed."""
BUILT = (Method.PROFILE, Method.SEASONAL)
"""The forecasters built from the hourly history."""
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
    compared: Mapping[str, Quality]
    """Forecaster -> its measure over the windows every forecaster that forecast any
    forecast: what the choice rests on."""
    chosen: str
    """One of :data:`FORECASTERS` (:data:`PROFILE` when the evidence is too thin)."""


def _hours(series: Sequence[float], window: int, keep_hours: int) -> range:
    """Indexes into ``series`` of the hours that begin a judged window: in the last
    ``keep_hours`` hours, with every hour of the window observed and complete."""
    if window < 1:
        raise ValueError(f"window must be >= 1 hour, got {window}")
    last = len(series) - 2  # the newest complete hour
    return range(max(0, len(series) - keep_hours), last - window + 1)


def _built(seasonal: bool = True) -> tuple[Method, ...]:
    """The forecasters built from the history that this installation offers
    (:func:`~webhook.decision.forecast.offered`: the seasonal one needs its library), the
    seasonal one left out unless ``seasonal``."""
    return tuple(m for m in offered() if m in BUILT and (seasonal or m is not Method.SEASONAL))


def _forecasts(
    first: datetime,
    series: Sequence[float],
    issues: Mapping[datetime, Sequence[float]],
    i: int,
    *,
    window: int,
    days: int,
    built: Sequence[Method] = BUILT,
) -> dict[str, Sequence[float]]:
    """Each forecaster's outlook ``[now, now+1 h, ..]`` for the window beginning at
    ``series[i]`` (left out: that forecaster had no forecast then, or is not in ``built``,
    :func:`_built`: what this installation offers, looked up once per judge)."""
    out: dict[str, Sequence[float]] = {}
    for method in built:
        if i + 1 >= enough(method, window):
            need = history_needed(method, window, days=days)
            past = series[max(0, i + 1 - need) : i + 1]
            at = epoch_hour(first) + i
            out[method.value] = outlook(method, past, window, days=days, at=at)
    issue = issues.get(first + i * HOUR)
    if issue is not None and len(issue) > window:
        out[PROVIDER] = issue[: window + 1]
    return out


def _scores(
    first: datetime,
    series: Sequence[float],
    issues: Mapping[datetime, Sequence[float]],
    i: int,
    *,
    window: int,
    days: int,
    built: Sequence[Method] = BUILT,
) -> dict[str, Score]:
    """Each forecaster's score of the window beginning at ``series[i]`` (:func:`_forecasts`)."""
    truth = series[i : i + window + 1]
    made = _forecasts(first, series, issues, i, window=window, days=days, built=built)
    return {name: score(forecast, truth) for name, forecast in made.items()}


Scores = Mapping[str, Mapping[datetime, Score]]
"""Forecaster -> issue hour -> its window's score."""


def _judgement(zone: str, provider: str, window: int, scores: Scores) -> Judgement:
    given = {f: held for f in FORECASTERS if (held := scores.get(f))}
    common = set.intersection(*(set(held) for held in given.values())) if given else set()
    compared = {
        f: summed(given[f][t] for t in common) if f in given else NO_WINDOWS for f in FORECASTERS
    }
    return Judgement(
        zone,
        provider,
        window,
        {f: summed(scores.get(f, {}).values()) for f in FORECASTERS},
        compared,
        choose(PROFILE, compared),
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
    """Judge every forecaster on ``series`` (hourly, the first at ``first``, the last the
    current hour) and ``issues`` (the provider's, by issue hour) over windows of
    ``window`` hours ahead beginning in the last ``keep_hours`` hours."""
    scores: dict[str, dict[datetime, Score]] = {f: {} for f in FORECASTERS}
    hours, built = _hours(series, window, keep_hours), _built()
    if first is not None:
        for i in hours:
            scored = _scores(first, series, issues, i, window=window, days=days, built=built)
            for name, s in scored.items():
                scores[name][first + i * HOUR] = s
    return _judgement(zone, provider, window, scores)


@dataclasses.dataclass(slots=True)
class _Kept:
    """One (provider, zone, window)'s window scores so far and its last judgement."""

    first: datetime
    stamp: tuple[datetime, int]
    judgement: Judgement
    scores: dict[str, dict[datetime, Score]] = dataclasses.field(
        default_factory=lambda: {f: {} for f in FORECASTERS}
    )
    seen: set[datetime] = dataclasses.field(default_factory=set)
    errors: dict[str, dict[datetime, tuple[float, ...]]] = dataclasses.field(
        default_factory=lambda: {f: {} for f in FORECASTERS}
    )
    """Forecaster -> issue hour -> its window's signed errors, 1, 2, .. hours ahead."""
    spreads: dict[str, Spread] = dataclasses.field(default_factory=dict)
    """Forecaster -> :meth:`Judge.spread` as of :attr:`stamp`."""


class Judge:
    """The :class:`Judgement` of each (provider, zone, window) over ``memory``, kept until
    a new hour is observed. A window's scores never change once all its hours are
    observed, so each new hour scores one new window per forecaster and forgets the
    oldest: judging stays cheap for the refresher and the outlook (the seasonal
    forecaster fits once a day, :mod:`webhook.decision.seasonal`)."""

    def __init__(self, memory: Memory, *, days: int = PROFILE_DAYS, seasonal: bool = True) -> None:
        """``seasonal``: judge the seasonal forecaster too (the feed's ``feed.seasonal``)."""
        self.memory = memory
        self.days = days
        self.built = _built(seasonal)
        self._held: dict[tuple[str, str, int], _Kept] = {}

    def judgement(self, provider: str, zone: str, window: int) -> Judgement:
        """How each forecaster ranked ``zone``'s hours, and which one ``best`` uses."""
        first, series = self.memory.history.timeline(provider, zone)
        hours = _hours(series, window, JUDGE_DAYS * 24)
        if first is None:
            return _judgement(zone, provider, window, {})
        key = (provider, zone, window)
        stamp = (first, len(series))
        kept = self._held.get(key)
        if kept is not None and kept.stamp == stamp:
            return kept.judgement
        if kept is None or first < kept.first:  # new, or older hours were filled in
            if len(self._held) >= CACHED:
                self._held.clear()
            kept = _Kept(first, stamp, _judgement(zone, provider, window, {}))
            self._held[key] = kept
        issues = self.memory.issues.held(provider, zone)
        oldest = first + hours.start * HOUR
        for i in hours:
            at = first + i * HOUR
            if at in kept.seen:
                continue
            kept.seen.add(at)
            truth = series[i : i + window + 1]
            made = _forecasts(first, series, issues, i, window=window, days=self.days,
                              built=self.built)  # fmt: skip
            for name, forecast in made.items():
                kept.scores[name][at] = score(forecast, truth)
                kept.errors[name][at] = tuple(
                    forecast[k] - truth[k] for k in range(1, min(len(forecast), len(truth)))
                )
        for name in FORECASTERS:
            for held in (kept.scores[name], kept.errors[name]):
                for at in [t for t in held if t < oldest]:
                    del held[at]
        kept.seen = {t for t in kept.seen if t >= oldest}
        kept.first, kept.stamp = first, stamp
        kept.spreads = {}
        kept.judgement = _judgement(zone, provider, window, kept.scores)
        return kept.judgement

    def spread(self, provider: str, zone: str, window: int, forecaster: str) -> Spread | None:
        """``forecaster``'s signed errors by hours ahead over the windows judged (what the
        pause's confidence reads, :func:`webhook.decision.pause.surely`); None before its
        first window."""
        self.judgement(provider, zone, window)
        kept = self._held.get((provider, zone, window))
        if kept is None or not kept.errors.get(forecaster):
            return None
        found = kept.spreads.get(forecaster)
        if found is None:
            errors = kept.errors[forecaster].values()
            by_horizon = [[e[k] for e in errors if len(e) > k] for k in range(window)]
            found = kept.spreads[forecaster] = Spread.of(by_horizon)
        return found
