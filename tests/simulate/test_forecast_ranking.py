"""The simulator's forecast ranking on hand-made series (the measure itself:
tests/decision/test_forecast_quality.py)."""

from __future__ import annotations

import pytest

from webhook.decision.forecast import Method
from webhook.simulate.ranking import judge_each


def test_a_perfect_forecast_scores_full_marks_and_persistence_none() -> None:
    # A clean daily cycle repeated for three weeks: the day-ahead profile is exact.
    day = [300.0 - 150.0 * (h in range(10, 16)) + h for h in range(24)]
    values = day * 21
    pools = [("Z", values, 2, 12)]
    exact, _ = judge_each(Method.PROFILE_MEAN, pools, days=7, stride=1)
    assert exact.top == pytest.approx(1.0)
    assert exact.spearman == pytest.approx(1.0)
    assert exact.captured == pytest.approx(100.0)
    assert exact.nmae == pytest.approx(0.0)
    flat, _ = judge_each(Method.PERSISTENCE, pools, days=7, stride=1)
    assert flat.spearman == 0.0
    assert flat.captured == pytest.approx(0.0)
    assert flat.nmae is not None
    assert flat.nmae > 10.0


def test_rankings_per_zone_add_up_to_the_overall_one() -> None:
    # Zone A repeats its day exactly; zone B's level jumps every day, so its profile errs.
    day = [300.0 - 150.0 * (h in range(10, 16)) + h for h in range(24)]
    steady = day * 21
    jumpy = [v + 200.0 * (i // 24 % 2) for i, v in enumerate(steady)]
    pools = [("A", steady, 1, 6), ("B", jumpy, 1, 6), ("A", steady, 2, 6)]
    overall, a, b = judge_each(Method.PROFILE_MEAN, pools, days=7, stride=1)
    assert (overall.zone, a.zone, b.zone) == (None, "A", "B")
    assert overall.windows == a.windows + b.windows
    assert a.windows == 2 * b.windows - 1  # the 2 h jobs need one hour more of truth
    assert a.nmae == pytest.approx(0.0)
    assert b.nmae is not None
    assert overall.nmae is not None
    assert 0.0 < overall.nmae < b.nmae
