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
  from past days, the *level* from now. On the 2023 traces this captures clearly more
  of the perfect-foresight temporal saving than the plain mean (a windy or a still week
  moves the whole day up or down).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from enum import StrEnum

HOURS_PER_DAY = 24


class Method(StrEnum):
    """A forecasting method (see the module docstring)."""

    PERSISTENCE = "persistence"
    PROFILE_MEAN = "profile-mean"
    PROFILE = "day-ahead-profile"


def persistence(history: Sequence[float], horizon: int) -> list[float]:
    """Forecast for hours ``now+1 .. now+horizon``: the current value repeated."""
    if not history:
        raise ValueError("history is empty")
    return [history[-1]] * max(horizon, 0)


def day_ahead_profile(history: Sequence[float], horizon: int, *, days: int = 7) -> list[float]:
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


def anchored_profile(history: Sequence[float], horizon: int, *, days: int = 7) -> list[float]:
    """:func:`day_ahead_profile` shifted by (current value - mean of this hour on past days)."""
    profile = day_ahead_profile(history, horizon, days=days)
    now = len(history) - 1
    past = [history[i] for d in range(1, days + 1) if (i := now - HOURS_PER_DAY * d) >= 0]
    if not past:
        return profile
    shift = history[now] - math.fsum(past) / len(past)
    return [v + shift for v in profile]


def history_needed(method: Method, horizon: int, *, days: int = 7) -> int:
    """How many trailing hours of history ``method`` reads for ``horizon`` (incl. now)."""
    if method is Method.PERSISTENCE:
        return 1
    return HOURS_PER_DAY * (days + math.ceil(max(horizon, 1) / HOURS_PER_DAY)) + 1


def outlook(
    method: Method, history: Sequence[float], horizon: int, *, days: int = 7
) -> list[float]:
    """``[now, now+1, .., now+horizon]``: the observed current value, then the forecast."""
    if method is Method.PERSISTENCE:
        ahead = persistence(history, horizon)
    elif method is Method.PROFILE_MEAN:
        ahead = day_ahead_profile(history, horizon, days=days)
    else:
        ahead = anchored_profile(history, horizon, days=days)
    return [history[-1], *ahead]


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
