"""A seasonal forecaster from a statistics library: Holt-Winters exponential smoothing.

:attr:`webhook.decision.forecast.Method.SEASONAL` is the class of forecaster published
carbon-aware schedulers rank hours with (seasonal ARIMA or exponential smoothing on the
last days of the feed): an additive level and a daily seasonal component
(:data:`SEASON` hours), fitted by maximum likelihood with statsmodels'
``ExponentialSmoothing`` on the last :data:`FIT_DAYS` days. statsmodels is an optional
extra (``pip install 'carbonshift[forecast]'``); without it :func:`available` is False and
the forecaster is not offered (:data:`UNAVAILABLE` says so in one line).

It sees only the past, as every forecaster of :mod:`webhook.decision.forecast` does:
``history`` ends at the current hour. Fitting costs tens of milliseconds, so a caller
that knows the hour on a fixed hourly clock passes it as ``at`` (hours since the epoch in
the feed, the scenario's hour in a replay): the model is then fitted once a day, on the
days ending at the last hour with ``at % 24 == 0``, and each hour in between reads that
fit's forecast from the current hour on, shifted through the current reading as the
anchored profile is (the shift fading over
:data:`~webhook.decision.forecast.ANCHOR_HOURS`). Without ``at`` it fits on every call.
A fit is a function of the hours it was fitted on alone, and the last :data:`CACHED` are
kept (:func:`functools.lru_cache`): the same hours give the same forecast, in any order.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import warnings
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

HOURS_PER_DAY = 24
SEASON = HOURS_PER_DAY
"""The seasonal period (hours): the daily cycle of solar and demand."""
FIT_DAYS = 7
"""Days of history each fit reads (LiteCast's SARIMAX reads 7)."""
FIT_HOURS = FIT_DAYS * HOURS_PER_DAY
REFIT_HOURS = HOURS_PER_DAY
"""With ``at``: hours between two fits."""
AHEAD = 96
"""Hours each fit forecasts: the longest horizon (72 h) plus the hours until the next fit."""
CACHED = 4096
"""Fits kept (a year of daily fits for ten zones, or a week of them for hundreds)."""
LIBRARY = "statsmodels"
EXTRA = "carbonshift[forecast]"
UNAVAILABLE = (
    f"the seasonal forecaster needs {LIBRARY}, which is not installed"
    f" (pip install '{EXTRA}'): it is not offered"
)
"""The one line said where the forecaster is asked for and the extra is missing."""


class Unavailable(RuntimeError):
    """The library the seasonal forecaster fits with is not installed."""


def available() -> bool:
    """True when statsmodels can be imported (the ``forecast`` extra is installed)."""
    return importlib.util.find_spec(LIBRARY) is not None


def _holt_winters() -> Any:
    try:
        module = importlib.import_module(f"{LIBRARY}.tsa.holtwinters")
    except ImportError as e:
        raise Unavailable(UNAVAILABLE) from e
    return module.ExponentialSmoothing


@lru_cache(maxsize=CACHED)
def fitted(window: tuple[float, ...]) -> tuple[float, ...]:
    """The forecast for the :data:`AHEAD` hours after ``window`` (hourly, oldest first)
    of the model fitted on it. Raises :class:`Unavailable` without statsmodels."""
    model = _holt_winters()
    if len(window) < 2 * SEASON or min(window) == max(window):
        return (window[-1],) * AHEAD
    with warnings.catch_warnings():
        # Convergence notes of the optimiser: the fit is used as it stands either way.
        warnings.simplefilter("ignore")
        fit = model(list(window), seasonal="add", seasonal_periods=SEASON).fit()
        path = [float(v) for v in fit.forecast(AHEAD)]
    if not all(math.isfinite(v) for v in path):
        return (window[-1],) * AHEAD
    return tuple(path)


def history_needed(horizon: int) -> int:
    """Trailing hours (including now) :func:`seasonal` reads for ``horizon``."""
    del horizon  # each fit forecasts AHEAD hours
    return FIT_HOURS + REFIT_HOURS - 1


def seasonal(
    history: Sequence[float], horizon: int, *, at: int | None = None, anchor_hours: float
) -> list[float]:
    """Forecast for hours ``now+1 .. now+horizon`` (``now``: the last of ``history``).

    ``at``: the current hour on a fixed hourly clock (None: fit now). The fit used is the
    one on the :data:`FIT_HOURS` hours ending at the last hour ``at - at % 24`` that
    ``history`` holds; its forecast of the current hour is shifted to the reading, the
    shift fading as ``exp(-k / anchor_hours)``. A history shorter than two days
    forecasts the current value."""
    if not history:
        raise ValueError("history is empty")
    if horizon > AHEAD - REFIT_HOURS:
        raise ValueError(f"the seasonal forecaster forecasts at most {AHEAD - REFIT_HOURS} h")
    now = len(history) - 1
    age = 0 if at is None else min(at % REFIT_HOURS, now)
    end = now - age  # the fit's last hour
    path = fitted(tuple(history[max(0, end + 1 - FIT_HOURS) : end + 1]))
    shift = history[now] - (path[age - 1] if age else history[now])
    return [path[age + k - 1] + shift * math.exp(-k / anchor_hours) for k in range(1, horizon + 1)]
