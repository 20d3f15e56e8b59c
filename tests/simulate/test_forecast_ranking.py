"""The forecast ranking measure on hand-made series."""

from __future__ import annotations

import pytest

from webhook.decision.forecast import Method
from webhook.simulate.ranking import judge, ranks, spearman, top_share, window


def test_ranks_share_ties() -> None:
    assert ranks([30.0, 10.0, 20.0, 10.0]) == [4.0, 1.5, 3.0, 1.5]


def test_spearman_on_hand_made_series() -> None:
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [40, 30, 20, 10]) == pytest.approx(-1.0)
    assert spearman([1, 2, 3, 4], [5, 5, 5, 5]) == 0.0  # a flat forecast ranks nothing
    # One swap of neighbours among 5: rho = 1 - 6 * 2 / (5 * 24) = 0.9.
    assert spearman([1, 2, 3, 4, 5], [1, 3, 2, 4, 5]) == pytest.approx(0.9)


def test_one_window_of_one_hour_jobs() -> None:
    # Eight starts (slack 7): the truly greenest quarter is hours 5 and 6; the forecast
    # has the day's shape but a step too early, so it holds hour 5 of those two and picks
    # hour 4 as the greenest start: 300 - 150 saved of the 300 - 100 possible.
    truth = [300.0, 280.0, 260.0, 200.0, 150.0, 100.0, 120.0, 250.0]
    forecast = [300.0, 270.0, 210.0, 160.0, 110.0, 130.0, 240.0, 290.0]
    top, rho, saved, possible = window(truth, forecast, length=1, slack=7)
    assert top == pytest.approx(0.5)
    assert rho == pytest.approx(spearman(truth, forecast))
    assert 0.5 < rho < 1.0
    assert (saved, possible) == (pytest.approx(150.0), pytest.approx(200.0))


def test_a_perfect_forecast_scores_full_marks_and_persistence_none() -> None:
    # A clean daily cycle repeated for three weeks: the day-ahead profile is exact.
    day = [300.0 - 150.0 * (h in range(10, 16)) + h for h in range(24)]
    values = day * 21
    pools = [(values, 2, 12)]
    exact = judge(Method.PROFILE_MEAN, pools, days=7, stride=1)
    assert exact.top == pytest.approx(1.0)
    assert exact.spearman == pytest.approx(1.0)
    assert exact.captured == pytest.approx(100.0)
    flat = judge(Method.PERSISTENCE, pools, days=7, stride=1)
    assert flat.spearman == 0.0
    assert flat.captured == pytest.approx(0.0)


def test_top_share_breaks_ties_like_best_start() -> None:
    assert top_share([1.0, 1.0, 5.0, 5.0], [0.0, 0.0, 0.0, 0.0], 2) == 1.0
