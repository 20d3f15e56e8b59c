"""Hourly history of the readings observed, per provider and zone, for honest forecasts.

The day-ahead profile (:mod:`webhook.decision.forecast`) forecasts from past hours, so
the feed keeps, for each provider and zone, one value per hour: the latest reading
whose period starts in that hour. It holds :data:`DAYS` days plus the current hour:
what the profile reads for a horizon up to a day
(:func:`~webhook.decision.forecast.history_needed`), for now and for every hour of the
last :data:`JUDGE_DAYS` days (so the profile's forecast of a past hour can be recomputed
to judge it, :mod:`webhook.feed.judging`), and forgets older hours. Hours without a
reading (an outage) repeat the hour before.

:func:`provider_outlook` turns a provider's own forecast periods into the same shape:
``[now, now+1 h, ...]``; :class:`Issues` keeps what it said in each hour of the last
:data:`JUDGE_DAYS` days, to judge it against what was then observed. Plain data, no I/O,
no clock: the feed passes ``now``.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Literal

from webhook.decision import forecast
from webhook.decision.forecast import HOURS_PER_DAY, Method, history_needed, outlook
from webhook.feed.forecasts import mean_over
from webhook.model.intensity import Reading

PROFILE_DAYS = forecast.DAYS
JUDGE_DAYS = 7
"""Days of forecasts judged: a provider's issues are kept this long, and the history long
enough to recompute the profile's forecast of each of these hours."""
DAYS = PROFILE_DAYS + 1 + JUDGE_DAYS
"""Days of hourly history held: the profile's days plus the day it forecasts, for every
hour of the days judged."""
ISSUE_HOURS = 48
"""Hours ahead kept of each forecast a provider issued (windows up to two days)."""
HOUR = timedelta(hours=1)
PROVIDER = "provider"
"""Outlook method: the provider's own forecast periods instead of one built from history."""
OutlookMethod = Method | Literal["provider", "best"] | None
"""A :class:`~webhook.decision.forecast.Method`, :data:`PROVIDER`, ``"best"`` (the one of
the two that ranked better, :mod:`webhook.feed.judging`), or None (no forecast)."""


def hour_of(at: datetime) -> datetime:
    """The start of the hour ``at`` falls in."""
    return at.replace(minute=0, second=0, microsecond=0)


def enough(method: Method, horizon: int) -> int:
    """Hours of history (including now) before ``method`` forecasts ``horizon`` hours from
    observed values only: for the profiles, the same hour one day back for every hour
    ahead."""
    if method is Method.PERSISTENCE:
        return 1
    return HOURS_PER_DAY * math.ceil(max(horizon, 1) / HOURS_PER_DAY) + 1


class History:
    """One value per hour for each (provider, zone), at most ``days`` days + one hour."""

    def __init__(self, days: int = DAYS) -> None:
        self.hours = days * HOURS_PER_DAY + 1
        self._held: dict[tuple[str, str], dict[datetime, float]] = {}

    def add(self, provider: str, reading: Reading) -> None:
        """Take in a reading: it becomes its hour's value (the latest of the hour wins)."""
        held = self._held.setdefault((provider, reading.zone), {})
        held[hour_of(reading.valid_from)] = reading.value
        self._trim(held)

    def seed(self, provider: str, zone: str, readings: Iterable[Reading]) -> None:
        """Take in a provider's past readings for ``zone``: each fills its hour unless the
        hour already holds a value (what was observed live wins)."""
        held = self._held.setdefault((provider, zone), {})
        for reading in readings:
            if reading.zone == zone:
                held.setdefault(hour_of(reading.valid_from), reading.value)
        self._trim(held)

    def _trim(self, held: dict[datetime, float]) -> None:
        """Forget the hours older than what is kept before the newest one."""
        if not held:
            return
        oldest = max(held) - (self.hours - 1) * HOUR
        for hour in [h for h in held if h < oldest]:
            del held[hour]

    def forget(self, zone: str) -> None:
        """Drop every provider's hours of ``zone`` (a zone no longer kept warm)."""
        for key in [k for k in self._held if k[1] == zone]:
            del self._held[key]

    def zones(self) -> set[str]:
        """The zones some hours are held for."""
        return {zone for _, zone in self._held}

    def short(self, provider: str, zone: str) -> bool:
        """True while less than a day (and the current hour) is held for ``zone``: the
        profile cannot forecast a day ahead yet."""
        held = self._held.get((provider, zone))
        return not held or (max(held) - min(held)) < HOURS_PER_DAY * HOUR

    def series(self, provider: str, zone: str) -> list[float]:
        """Hourly values, oldest first, ending with the newest hour held (may be empty)."""
        return self.timeline(provider, zone)[1]

    def timeline(self, provider: str, zone: str) -> tuple[datetime | None, list[float]]:
        """The first hour held (None: nothing held) and :meth:`series`."""
        held = self._held.get((provider, zone))
        if not held:
            return None, []
        hour, newest = min(held), max(held)
        out: list[float] = []
        first = hour
        while hour <= newest:
            out.append(held.get(hour, out[-1] if out else 0.0))
            hour += HOUR
        return first, out

    def outlook(
        self, provider: str, zone: str, horizon: int, method: Method, *, days: int = PROFILE_DAYS
    ) -> list[float] | None:
        """``[now, now+1 h, .., now+horizon]`` by ``method`` over the held hours (now: the
        newest hour held); None without :func:`enough` history."""
        first, series = self.timeline(provider, zone)
        if first is None or len(series) < enough(method, horizon):
            return None
        tail = series[-history_needed(method, horizon, days=days) :]
        return outlook(method, tail, horizon, days=days, at=epoch_hour(first) + len(series) - 1)


def epoch_hour(at: datetime) -> int:
    """Hours since the Unix epoch of the hour ``at`` falls in: the fixed hourly clock
    :func:`~webhook.decision.forecast.outlook` takes as ``at``."""
    return math.floor(at.timestamp() / 3600)


def provider_outlook(
    periods: Iterable[Reading], latest: Reading, now: datetime, horizon: int
) -> list[float] | None:
    """``[latest, hour+1, ...]`` from a provider's forecast periods: each coming hour's
    time-weighted mean (:func:`webhook.feed.forecasts.mean_over`), up to the first hour
    the forecast covers less than half of. None when it covers no coming hour."""
    periods = list(periods)
    start = hour_of(now)
    out = [latest.value]
    for k in range(1, horizon + 1):
        mean = mean_over(periods, latest, start + k * HOUR, HOUR)
        if mean is None:
            break
        out.append(mean.value)
    return out if len(out) > 1 else None


class Issues:
    """The forecasts a provider issued, per (provider, zone): one per hour (the latest of
    the hour wins), each as ``[t, t+1 h, .., t+ahead]`` (:func:`provider_outlook` at the
    hour ``t`` it was issued in, up to what it covered), for the last ``days`` days.

    A ring bounded in time and size: at most ``days * 24`` issues of ``ahead + 1`` floats
    (8 bytes each, in an :class:`array.array`) per provider and zone.
    """

    def __init__(self, days: int = JUDGE_DAYS, ahead: int = ISSUE_HOURS) -> None:
        self.hours = days * HOURS_PER_DAY
        self.ahead = ahead
        self._held: dict[tuple[str, str], dict[datetime, array[float]]] = {}

    def add(self, provider: str, zone: str, hour: datetime, values: Sequence[float]) -> None:
        """Keep what the provider forecast in ``hour`` (from that hour on)."""
        held = self._held.setdefault((provider, zone), {})
        held[hour_of(hour)] = array("d", values[: self.ahead + 1])
        oldest = max(held) - (self.hours - 1) * HOUR
        for old in [h for h in held if h < oldest]:
            del held[old]

    def forget(self, zone: str) -> None:
        """Drop every provider's issues for ``zone`` (a zone no longer kept warm)."""
        for key in [k for k in self._held if k[1] == zone]:
            del self._held[key]

    def held(self, provider: str, zone: str) -> Mapping[datetime, Sequence[float]]:
        """Issue hour -> what was forecast from it (empty when nothing was kept)."""
        return self._held.get((provider, zone), {})

    def count(self) -> int:
        """Issues kept, over every provider and zone."""
        return sum(len(held) for held in self._held.values())
