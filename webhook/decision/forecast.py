"""Honest intensity forecasts built from the past only, and the greenest start they imply.

Every function takes ``history``: observed hourly values in time order whose last
element is the current hour (the latest reading a provider gives). Nothing here can
see past that element, so decisions built on these forecasts never peek at the future.

Forecasts:

- :attr:`Method.PERSISTENCE`: every future hour equals the current one.
- :attr:`Method.PROFILE_MEAN` (day-ahead profile): hour ``now + k`` is the mean of the
  same hour of day on the ``days`` most recent days for which it is already observed
  (``now + k - 24 d`` for ``d >= ceil(k / 24)``). It captures the daily solar/demand
  cycle, which is what temporal shifting within a day exploits.
- :attr:`Method.PROFILE` (anchored day-ahead profile, the default): the same profile
  shifted so that it passes through the current reading: the *shape* of the day comes
  from past days, the *level* from now. The shift fades with the horizon
  (e-folding time :data:`ANCHOR_HOURS`): a windy or a still spell moves the next hours
  up or down, the day after less. On the 2023 traces this captures clearly more of the
  perfect-foresight temporal saving than the plain mean (README "Carbon results").
- :attr:`Method.SEASONAL`: Holt-Winters exponential smoothing with a daily season, fitted
  by statsmodels on the last week (:mod:`webhook.decision.seasonal`, the optional
  ``forecast`` extra), anchored on the current reading like the profile. Offered only
  where the extra is installed (:func:`offered`).

:func:`outlook` takes ``at``, the current hour on a fixed hourly clock, which only the
seasonal forecaster reads (to fit once a day, not every hour).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from enum import StrEnum

from webhook.decision import seasonal
from webhook.model.intensity import IntensityTable

HOURS_PER_DAY = 24
DAYS = 14
"""Past days the profiles average (the feed keeps this many days of hourly history)."""
ANCHOR_HOURS = 36.0
"""E-folding time of the anchored profile's shift to the current reading. Chosen with
``carbonshift simulate`` on the 2023 traces (24 h to 48 h all within 0.3 points of the
oracle share; a constant shift, the limit of large values, 2 points less)."""


class Method(StrEnum):
    """A forecasting method (see the module docstring)."""

    PERSISTENCE = "persistence"
    PROFILE_MEAN = "profile-mean"
    PROFILE = "day-ahead-profile"
    SEASONAL = "seasonal"


def offered() -> tuple[Method, ...]:
    """The methods this installation can run: all but :attr:`Method.SEASONAL` when its
    library (the ``forecast`` extra) is missing."""
    return tuple(m for m in Method if m is not Method.SEASONAL or seasonal.available())


def persistence(history: Sequence[float], horizon: int) -> list[float]:
    """Forecast for hours ``now+1 .. now+horizon``: the current value repeated."""
    if not history:
        raise ValueError("history is empty")
    return [history[-1]] * max(horizon, 0)


def day_ahead_profile(history: Sequence[float], horizon: int, *, days: int = DAYS) -> list[float]:
    """Forecast for hours ``now+1 .. now+horizon`` from the same hours on past days.

    Offsets with no observed same-hour value yet (a history shorter than a day) fall
    back to the current value.
    """
    if not history:
        raise ValueError("history is empty")
    if days < 1:
        raise ValueError(f"days must be >= 1, got {days}")
    now = len(history) - 1
    out: list[float] = []
    for k in range(1, horizon + 1):
        first = -(-k // HOURS_PER_DAY)  # ceil(k / 24): the most recent day already observed
        latest = now + k - HOURS_PER_DAY * first  # <= now
        if latest < 0:
            out.append(history[now])
            continue
        oldest = latest - HOURS_PER_DAY * (days - 1)
        if oldest < 0:
            oldest = latest % HOURS_PER_DAY
        same_hour = history[oldest : latest + 1 : HOURS_PER_DAY]
        out.append(sum(same_hour) / len(same_hour))
    return out


def anchored_profile(history: Sequence[float], horizon: int, *, days: int = DAYS) -> list[float]:
    """:func:`day_ahead_profile` shifted by (current value - mean of this hour on past
    days), the shift fading as ``exp(-k / ANCHOR_HOURS)`` for hour ``now + k``."""
    profile = day_ahead_profile(history, horizon, days=days)
    now = len(history) - 1
    past = [history[i] for d in range(1, days + 1) if (i := now - HOURS_PER_DAY * d) >= 0]
    if not past:
        return profile
    shift = history[now] - math.fsum(past) / len(past)
    return [v + shift * math.exp(-k / ANCHOR_HOURS) for k, v in enumerate(profile, start=1)]


def history_needed(method: Method, horizon: int, *, days: int = DAYS) -> int:
    """How many trailing hours of history ``method`` reads for ``horizon`` (incl. now)."""
    if method is Method.PERSISTENCE:
        return 1
    if method is Method.SEASONAL:
        return seasonal.history_needed(horizon)
    return HOURS_PER_DAY * (days + math.ceil(max(horizon, 1) / HOURS_PER_DAY)) + 1


def outlook(
    method: Method,
    history: Sequence[float],
    horizon: int,
    *,
    days: int = DAYS,
    at: int | None = None,
) -> list[float]:
    """``[now, now+1, .., now+horizon]``: the observed current value, then the forecast.
    ``at``: the current hour on a fixed hourly clock (read by :attr:`Method.SEASONAL`
    alone; None: it fits on this call's history)."""
    if method is Method.PERSISTENCE:
        ahead = persistence(history, horizon)
    elif method is Method.SEASONAL:
        ahead = seasonal.seasonal(history, horizon, at=at, anchor_hours=ANCHOR_HOURS)
    elif method is Method.PROFILE_MEAN:
        ahead = day_ahead_profile(history, horizon, days=days)
    else:
        ahead = anchored_profile(history, horizon, days=days)
    return [history[-1], *ahead]


RANK_HOURS = 24
"""Placements re-decided on a forecast rank each zone on its outlook's mean over this many
hours, the current one included (the simulator's ``forecast_hours`` default)."""


def ranking_value(series: Sequence[float]) -> float:
    """What a placement ranks a zone on, given its outlook ``[now, now+1 h, ...]``: the mean."""
    if not series:
        raise ValueError("series is empty")
    return math.fsum(series) / len(series)


def on_forecast(
    table: IntensityTable,
    zones: Sequence[str],
    outlook: Callable[[str], Sequence[float] | None],
    basis: str,
) -> IntensityTable:
    """``table`` with each of ``zones`` read as :func:`ranking_value` of ``outlook(zone)``.

    A zone without an outlook (not enough history, stale) keeps its current reading.
    ``basis`` names the forecast in the reading's source, so decision records say what
    the placement was ranked on.
    """
    out = dict(table)
    for zone in zones:
        reading = table.get(zone)
        series = outlook(zone) if reading is not None else None
        if reading is None or not series:
            continue
        source = f"{reading.source} ({basis})"
        out[zone] = dataclasses.replace(reading, value=ranking_value(series), source=source)
    return out


def best_start(series: Sequence[float], length: int, latest: int) -> int:
    """Offset in ``0..latest`` where a run of ``length`` hours has the lowest mean.

    ``series[0]`` is the current hour. Ties go to the earliest start; windows running
    past the end of ``series`` are scored on the part that is there.
    """
    if not series:
        raise ValueError("series is empty")
    if length < 1:
        raise ValueError(f"length must be >= 1, got {length}")
    latest = min(max(latest, 0), len(series) - 1)
    best, best_mean = 0, math.inf
    for start in range(latest + 1):
        window = series[start : start + length]
        mean = math.fsum(window) / len(window)
        if mean < best_mean:
            best, best_mean = start, mean
    return best
