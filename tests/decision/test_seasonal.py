"""The seasonal forecaster: Holt-Winters from statsmodels, fitted daily, past only."""

from __future__ import annotations

import importlib
import importlib.util
import math
from typing import Any

import pytest

from webhook.decision import seasonal
from webhook.decision.forecast import ANCHOR_HOURS, Method, history_needed, offered, outlook
from webhook.decision.forecast_quality import score


def daily(hours: int, *, noise: int = 7) -> list[float]:
    """A strong daily cycle (a solar dip at midday) with a little deterministic noise."""
    return [
        300.0 - 120.0 * math.sin(2 * math.pi * (h % 24) / 24) + float((h * 37) % noise)
        for h in range(hours)
    ]


def test_it_ranks_the_hours_of_a_daily_cycle() -> None:
    history = daily(24 * 8 + 6)
    ahead = outlook(Method.SEASONAL, history, 24)
    truth = daily(len(history) + 24)[len(history) - 1 :]
    assert score(ahead, truth).spearman > 0.95


def test_it_reads_only_the_past_even_fitted_a_day_before() -> None:
    series = daily(24 * 12)
    now = 24 * 10 + 7
    need = history_needed(Method.SEASONAL, 30)
    before = outlook(Method.SEASONAL, series[now + 1 - need : now + 1], 30, at=now)
    future = [*series[: now + 1], *([999.0] * (len(series) - now - 1))]
    assert outlook(Method.SEASONAL, future[now + 1 - need : now + 1], 30, at=now) == before
    assert outlook(Method.SEASONAL, series[: now + 1], 30, at=now) == before


def test_with_a_clock_it_fits_once_a_day_and_anchors_each_hour() -> None:
    seasonal.fitted.cache_clear()
    series = daily(24 * 10)
    midnight = 24 * 8
    forecasts = [
        outlook(Method.SEASONAL, series[: t + 1], 24, at=t) for t in range(midnight, midnight + 24)
    ]
    assert seasonal.fitted.cache_info().misses == 1
    path = seasonal.fitted(tuple(series[midnight + 1 - seasonal.FIT_HOURS : midnight + 1]))
    t = midnight + 5
    shift = series[t] - path[4]
    assert forecasts[5][1] == pytest.approx(path[5] + shift * math.exp(-1 / ANCHOR_HOURS))
    assert forecasts[5][0] == series[t]  # the current hour as observed
    # Without a clock it fits on the hours it is given, now included.
    outlook(Method.SEASONAL, series[: t + 1], 24)
    assert seasonal.fitted.cache_info().misses == 2


def test_short_or_flat_history_forecasts_the_current_value() -> None:
    assert outlook(Method.SEASONAL, [5.0] * 30, 3) == [5.0] * 4
    assert outlook(Method.SEASONAL, [1.0, 2.0, 3.0], 2) == [3.0, 3.0, 3.0]
    with pytest.raises(ValueError, match="at most"):
        outlook(Method.SEASONAL, [1.0], seasonal.AHEAD)


def test_without_the_extra_it_is_not_offered_and_says_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_find, real_import = importlib.util.find_spec, importlib.import_module

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == seasonal.LIBRARY else real_find(name, *args)

    def import_module(name: str, *args: Any) -> Any:
        if name.startswith(seasonal.LIBRARY):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    monkeypatch.setattr(importlib, "import_module", import_module)
    seasonal.fitted.cache_clear()
    assert not seasonal.available()
    assert Method.SEASONAL not in offered()
    assert Method.PROFILE in offered()
    with pytest.raises(seasonal.Unavailable, match=r"pip install 'carbonshift\[forecast\]'"):
        outlook(Method.SEASONAL, daily(24 * 8), 24)
    assert "\n" not in seasonal.UNAVAILABLE
