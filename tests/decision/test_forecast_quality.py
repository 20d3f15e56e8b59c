"""The ranking-quality measure: top-quarter capture, Spearman and captured saving."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.decision.forecast_quality import (
    MIN_ERRORS,
    MIN_WINDOWS,
    NO_WINDOWS,
    TIE,
    Quality,
    Score,
    Spread,
    Tally,
    choose,
    errors_by_horizon,
    measure,
    prefer_provider,
    ranks,
    score,
    spearman,
    summed,
    top_share,
    window,
)


def test_ranks_share_ties() -> None:
    assert ranks([30.0, 10.0, 20.0, 10.0]) == [4.0, 1.5, 3.0, 1.5]


@pytest.mark.parametrize(
    ("a", "b", "rho"),
    [
        ([1, 2, 3, 4], [10, 20, 30, 40], 1.0),
        ([1, 2, 3, 4], [40, 30, 20, 10], -1.0),
        ([1, 2, 3, 4], [5, 5, 5, 5], 0.0),  # a flat forecast ranks nothing
        # One swap of neighbours among 5: rho = 1 - 6 * 2 / (5 * 24) = 0.9.
        ([1, 2, 3, 4, 5], [1, 3, 2, 4, 5], 0.9),
    ],
)
def test_spearman_on_hand_made_series(a: list[float], b: list[float], rho: float) -> None:
    assert spearman(a, b) == pytest.approx(rho)


def test_one_window_of_one_hour_jobs() -> None:
    # Eight starts (slack 7): the truly greenest quarter is hours 5 and 6; the forecast
    # has the day's shape but a step too early, so it holds hour 5 of those two and picks
    # hour 4 as the greenest start: 300 - 150 saved of the 300 - 100 possible.
    truth = [300.0, 280.0, 260.0, 200.0, 150.0, 100.0, 120.0, 250.0]
    forecast = [300.0, 270.0, 210.0, 160.0, 110.0, 130.0, 240.0, 290.0]
    top, rho, saved, possible, error, level = window(truth, forecast, length=1, slack=7)
    assert top == pytest.approx(0.5)
    assert rho == pytest.approx(spearman(truth, forecast))
    assert 0.5 < rho < 1.0
    assert [saved, possible] == pytest.approx([150.0, 200.0])
    # The forecast hours only (the first is observed): 10+50+40+40+30+120+40 off 1360.
    assert [error, level] == pytest.approx([330.0, 1360.0])
    assert score(forecast, truth) == Score(top, rho, saved, possible, error, level)
    assert summed([score(forecast, truth)] * 2).nmae == pytest.approx(100 * 330 / 1360)


def test_top_share_breaks_ties_like_best_start() -> None:
    assert top_share([1.0, 1.0, 5.0, 5.0], [0.0, 0.0, 0.0, 0.0], 2) == 1.0


@pytest.mark.parametrize(
    ("pairs", "windows", "top", "rho", "captured"),
    [
        ([], 0, 0.0, 0.0, None),
        # perfect, then reversed: the means of 1 and 0 / 1 and -1; saved 30 - 10 and 30 - 30
        (
            [([10.0, 20.0, 30.0, 40.0], [40.0, 30.0, 20.0, 10.0]),
             ([40.0, 30.0, 20.0, 10.0], [40.0, 30.0, 20.0, 10.0])],
            2, 0.5, 0.0, 50.0,
        ),
        # starting now is always best: no saving to capture
        ([([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])], 1, 1.0, 1.0, None),
    ],
)  # fmt: skip
def test_measure_over_windows(
    pairs: list[tuple[list[float], list[float]]],
    windows: int,
    top: float,
    rho: float,
    captured: float | None,
) -> None:
    q = measure(pairs)
    assert q.windows == windows
    assert q.top == pytest.approx(top)
    assert q.spearman == pytest.approx(rho)
    assert q.captured == (pytest.approx(captured) if captured is not None else None)


def test_jobs_longer_than_an_hour_score_their_starts() -> None:
    # Two-hour jobs over five hours: starts 0..3 score the means 25, 35, 25, 15.
    truth = [20.0, 30.0, 40.0, 10.0, 20.0]
    s = score(truth, truth, length=2)
    assert [s.top, s.spearman, s.saved, s.possible] == pytest.approx([1.0, 1.0, 10.0, 10.0])
    with pytest.raises(ValueError, match="different hours"):
        score(truth, truth[:-1])
    with pytest.raises(ValueError, match="no 6 h job"):
        score(truth, truth, length=6)


def test_an_empty_tally_says_so() -> None:
    assert Tally().quality() == NO_WINDOWS


distinct = st.lists(
    st.floats(0, 2000, allow_nan=False, allow_subnormal=False), min_size=2, max_size=49, unique=True
)


@settings(max_examples=200, deadline=None)
@given(truth=distinct, other=st.randoms(use_true_random=False))
def test_perfect_scores_best_and_reversed_worst(truth: list[float], other: object) -> None:
    """A perfect forecast captures the whole greenest quarter with Spearman 1; the reversed
    one none of it with Spearman -1, and any forecast lies between the two."""
    order = sorted(truth)
    reversed_ = [order[len(order) - 1 - order.index(v)] for v in truth]
    perfect, worst = score(truth, truth), score(reversed_, truth)
    assert perfect.top == 1.0
    assert perfect.spearman == pytest.approx(1.0)
    assert perfect.saved == perfect.possible
    assert worst.top == 0.0
    assert worst.spearman == pytest.approx(-1.0)
    assert worst.saved == min(truth[0] - v for v in truth)
    shuffled = list(truth)
    other.shuffle(shuffled)  # type: ignore[attr-defined]
    s = score(shuffled, truth)
    assert worst.top <= s.top <= perfect.top
    assert worst.spearman - 1e-9 <= s.spearman <= perfect.spearman + 1e-9
    assert worst.saved <= s.saved <= perfect.saved
    assert measure([(truth, truth)] * 3).spearman == pytest.approx(1.0)


def _quality(windows: int, rho: float) -> Quality:
    return Quality(windows, 0.5, rho, None)


def test_choose_takes_the_clearly_better_ranker_on_enough_windows() -> None:
    base = _quality(MIN_WINDOWS, 0.60)
    seasonal, provider = _quality(MIN_WINDOWS, 0.70), _quality(MIN_WINDOWS, 0.65)
    compared = {"profile": base, "seasonal": seasonal, "provider": provider}
    assert choose("profile", compared) == "seasonal"
    assert choose("profile", {**compared, "seasonal": _quality(MIN_WINDOWS, 0.605)}) == "provider"
    # A tie, too few windows, or other windows than the default's: the default stays.
    assert choose("profile", {"profile": base, "seasonal": _quality(MIN_WINDOWS, 0.6 + TIE)}) == (
        "profile"
    )
    thin = _quality(MIN_WINDOWS - 1, 0.9)
    assert choose("profile", {"profile": _quality(MIN_WINDOWS - 1, 0.1), "s": thin}) == "profile"
    assert choose("profile", {"profile": base, "s": _quality(MIN_WINDOWS + 1, 0.9)}) == "profile"
    assert prefer_provider(base, provider)
    assert not prefer_provider(provider, base)


def test_the_spread_bounds_a_forecast_by_the_errors_quantile() -> None:
    errors = errors_by_horizon([([0.0, 10.0, 20.0], [0.0, 10.0 - e, 20.0]) for e in range(40)], 2)
    assert errors[0] == [float(e) for e in range(40)]
    assert errors[1] == [0.0] * 40
    spread = Spread.of(reversed(e) for e in errors)
    # 80 % of the past errors are >= 8: the truth is below forecast - 8 with 80 % odds.
    assert spread.bound(1, 100.0, 0.8) == 92.0
    assert spread.bound(1, 100.0, 0.5) == 80.0
    assert spread.bound(2, 100.0, 0.99) == 100.0
    assert spread.bound(3, 100.0, 0.8) is None  # nothing measured that far ahead
    assert Spread.of([[1.0] * (MIN_ERRORS - 1)]).bound(1, 5.0, 0.8) is None
    with pytest.raises(ValueError, match="confidence"):
        spread.bound(1, 100.0, 1.0)
