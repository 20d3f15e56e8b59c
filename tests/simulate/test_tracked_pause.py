"""The simulator's forecast pause with a memory: the judged forecaster and the hold that
needs a surely greener start."""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Sequence

from webhook.decision.forecast import Method
from webhook.simulate.batch import JUDGE_HOURS, PoolMoment, Tracked, pause_by_forecast


def _history(values: Sequence[float], hour: int, length: int) -> Sequence[float]:
    return values[max(0, hour + 1 - length) : hour + 1]


def moments(values: Sequence[float], slack: int = 24) -> list[PoolMoment]:
    return [
        PoolMoment(t, values[t], slack, 1, functools.partial(_history, values, t))
        for t in range(len(values))
    ]


def moved(days: int, *, on_day: int, noise: float = 8.0) -> list[float]:
    """A daily dip at 13:00 that moves to 03:00 from ``on_day`` on."""
    rng = random.Random(4)
    return [
        400
        - 120 * math.cos(2 * math.pi * (h % 24 - (13 if h // 24 < on_day else 3)) / 24)
        + rng.gauss(0, noise)
        for h in range(days * 24)
    ]


def test_the_judged_pause_takes_the_seasonal_forecaster_once_it_ranks_better() -> None:
    values = moved(30, on_day=18)
    judged = Tracked((Method.PROFILE, Method.SEASONAL), 14)
    for m in moments(values):
        judged(m)
    # The profile until the judge has a week of windows, then the fit on the last week
    # follows the moved dip while the two-week profile still averages the old one in.
    assert judged.chosen[Method.PROFILE] >= JUDGE_HOURS
    assert judged.chosen.get(Method.SEASONAL, 0) > 48


def test_the_judged_pause_keeps_the_profile_on_a_steady_day() -> None:
    values = moved(24, on_day=99)
    judged = Tracked((Method.PROFILE, Method.SEASONAL), 14)
    for m in moments(values):
        judged(m)
    assert set(judged.chosen) == {Method.PROFILE}


def test_the_sure_pause_holds_less_on_a_noisy_grid_and_alone_is_the_plain_one() -> None:
    values = moved(20, on_day=99, noise=60.0)
    plain = pause_by_forecast(Method.PROFILE, 14)
    alone = Tracked((Method.PROFILE,), 14)
    sure = Tracked((Method.PROFILE,), 14, confidence=0.9)
    held = {"plain": 0, "alone": 0, "sure": 0}
    for m in moments(values):
        p, a, s = plain(m), alone(m), sure(m)
        assert a == p
        held["plain"] += p
        held["alone"] += a
        held["sure"] += s
    assert 0 < held["sure"] < held["plain"]
