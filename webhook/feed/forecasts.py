"""Forecasts: the time-weighted mean intensity over a coming horizon."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from webhook.model.intensity import Reading

MIN_COVERAGE = 0.5
""":func:`mean_over` needs forecasts for at least this share of the horizon."""


def mean_over(
    periods: Iterable[Reading], latest: Reading, now: datetime, horizon: timedelta
) -> Reading | None:
    """Time-weighted mean over ``[now, now + horizon)`` of one provider's forecast
    ``periods`` plus its ``latest`` reading for the current period (signals are never
    mixed).

    None when there is no forecast or it covers less than :data:`MIN_COVERAGE` of the
    horizon. The result is flagged estimated; its ``valid_from``/``valid_to`` are the
    part of the horizon actually covered and its ``source`` is
    ``<latest's source>+forecast``.
    """
    periods = list(periods)
    if not periods or horizon <= timedelta(0):
        return None
    end = now + horizon
    if not any(p.valid_from <= now < p.valid_to for p in periods):
        periods.append(latest)
    weighted = covered = 0.0
    first, last = end, now
    for p in periods:
        start, stop = max(p.valid_from, now), min(p.valid_to, end)
        seconds = (stop - start).total_seconds()
        if seconds <= 0:
            continue
        weighted += p.value * seconds
        covered += seconds
        first, last = min(first, start), max(last, stop)
    if covered < MIN_COVERAGE * horizon.total_seconds():
        return None
    return Reading(
        zone=latest.zone,
        value=weighted / covered,
        signal=latest.signal,
        valid_from=first,
        valid_to=last,
        estimated=True,
        source=f"{latest.source}+forecast",
    )
