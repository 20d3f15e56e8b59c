"""The simulator's forecast ranking on hand-made series (the measure itself:
tests/decision/test_forecast_quality.py)."""

from __future__ import annotations

import pytest

from webhook.decision.forecast import Method
from webhook.simulate.ranking import judge


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
