"""Decision-core helpers: honest forecasts, greenest start, hysteresis and dwell."""

from __future__ import annotations

import math

import pytest

from tests.support import reading
from webhook.decision import hysteresis
from webhook.decision.forecast import (
    ANCHOR_HOURS,
    Method,
    anchored_profile,
    best_start,
    day_ahead_profile,
    history_needed,
    on_forecast,
    outlook,
    persistence,
    ranking_value,
)
from webhook.model import config


def test_persistence_repeats_the_current_value() -> None:
    assert persistence([3.0, 5.0], 3) == [5.0, 5.0, 5.0]


def test_day_ahead_profile_averages_the_same_hour_on_past_days() -> None:
    day1 = [float(h) for h in range(24)]
    day2 = [float(h + 10) for h in range(24)]
    history = day1 + day2[:12]  # now = 11:00 on day 2
    # 12:00 tomorrow-ish: hour 12 on day 1 only (day 2's 12:00 is in the future).
    assert day_ahead_profile(history, 1, days=7) == [12.0]
    # 11:00 tomorrow (k=24): day 2's 11:00 (21) and day 1's 11:00 (11).
    assert day_ahead_profile(history, 24, days=2)[-1] == pytest.approx(16.0)


def test_anchored_profile_takes_the_level_from_now() -> None:
    history = [10.0, 20.0] * 18 + [40.0]  # now (hour 36) read 10 a day ago
    plain = day_ahead_profile(history, 2, days=1)
    assert plain == [20.0, 10.0]
    shift = 30.0  # now minus this hour a day ago
    fade = [math.exp(-k / ANCHOR_HOURS) for k in (1, 2)]
    assert anchored_profile(history, 2, days=1) == pytest.approx(
        [20.0 + shift * fade[0], 10.0 + shift * fade[1]]
    )


def test_anchored_profile_shift_fades_towards_the_plain_profile() -> None:
    history = [10.0, 20.0] * 18 + [40.0]
    ahead = anchored_profile(history, 24 * 10, days=1)
    plain = day_ahead_profile(history, 24 * 10, days=1)
    gaps = [a - p for a, p in zip(ahead, plain, strict=True)]
    assert all(g > 0 for g in gaps)
    assert gaps == sorted(gaps, reverse=True)
    assert gaps[-1] < 0.01 * gaps[0]


def test_outlook_starts_with_the_observed_current_value() -> None:
    assert outlook(Method.PERSISTENCE, [1.0, 2.0], 2) == [2.0, 2.0, 2.0]


@pytest.mark.parametrize("method", list(Method))
def test_forecasts_never_read_past_now(method: Method) -> None:
    series = [float((h * 37) % 11) for h in range(24 * 10)]
    now = 24 * 9 + 5
    need = history_needed(method, 30, days=7)
    assert need <= now + 1
    history = series[now + 1 - need : now + 1]
    before = outlook(method, history, 30, days=7)
    perturbed = series[: now + 1] + [999.0] * (len(series) - now - 1)
    assert outlook(method, perturbed[now + 1 - need : now + 1], 30, days=7) == before
    # And the slice the callers pass is all the method reads: longer history changes nothing.
    assert outlook(method, series[: now + 1], 30, days=7) == before


def test_best_start_picks_the_lowest_mean_window_earliest_on_ties() -> None:
    assert best_start([5.0, 1.0, 1.0, 9.0], 2, 3) == 1
    assert best_start([1.0, 1.0], 1, 1) == 0
    assert best_start([9.0, 8.0, 1.0], 1, 1) == 1  # latest start bounds the search


def test_should_switch_needs_margin_and_dwell() -> None:
    rule = hysteresis.Hysteresis(margin=0.1, dwell_hours=4)
    assert not hysteresis.should_switch(rule, held_cost=100, proposed_cost=95, held_hours=10)
    assert hysteresis.should_switch(rule, held_cost=100, proposed_cost=89, held_hours=10)
    assert not hysteresis.should_switch(rule, held_cost=100, proposed_cost=10, held_hours=3)


def test_expected_intensity_is_weight_averaged_and_neutral_for_unknowns() -> None:
    assert hysteresis.expected_intensity({"a": 3, "b": 1}, {"a": 100, "b": 200}) == 125
    assert hysteresis.expected_intensity({"a": 1, "c": 1}, {"a": 100, "b": 300}) == 150
    assert hysteresis.expected_intensity({}, {"a": 1}) is None


def test_invalid_rules_are_rejected() -> None:
    with pytest.raises(ValueError, match=r"hysteresis\.margin"):
        config.parse({"hysteresis": {"margin": 1.0}})
    with pytest.raises(ValueError, match=r"hysteresis\.dwell_hours"):
        config.parse({"hysteresis": {"dwell_hours": -1}})


def test_judge_says_why_a_proposal_is_taken_or_held() -> None:
    rule = hysteresis.Hysteresis(margin=0.1, dwell_hours=4)
    values = {"a": 100.0, "b": 95.0, "c": 50.0}
    held = hysteresis.Held({"a": 1}, since=0)
    verdict = hysteresis.Verdict
    assert hysteresis.judge(rule, None, {"a": 1}, values, 0) is verdict.NEW
    assert hysteresis.judge(rule, held, {}, values, 1) is verdict.NEW  # nothing to compare
    assert hysteresis.judge(rule, held, {"a": 1}, values, 1) is verdict.SAME
    assert hysteresis.judge(rule, held, {"c": 1}, values, 3) is verdict.DWELL
    assert hysteresis.judge(rule, held, {"b": 1}, values, 5) is verdict.MARGIN
    assert hysteresis.judge(rule, held, {"c": 1}, values, 5) is verdict.SWITCH
    assert {v for v in verdict if v.keeps} == {verdict.SAME, verdict.DWELL, verdict.MARGIN}


def test_on_forecast_reads_each_zone_at_its_outlook_mean_and_names_the_basis() -> None:
    table = {"SE": reading("SE", 25.0), "FR": reading("FR", 100.0), "PL": reading("PL", 800.0)}
    outlooks = {"SE": [25.0, 900.0, 900.0, 900.0], "FR": [100.0, 30.0, 30.0, 30.0]}
    ranked = on_forecast(table, ["SE", "FR", "PL"], outlooks.get, "day-ahead-profile 24 h mean")
    assert ranked["SE"].value == pytest.approx(ranking_value(outlooks["SE"])) == 681.25
    assert ranked["FR"].value == pytest.approx(47.5)
    assert ranked["PL"] is table["PL"]  # no outlook: the current reading
    assert ranked["SE"].source == "test (day-ahead-profile 24 h mean)"
    assert ranked["SE"].valid_from == table["SE"].valid_from
    assert table["SE"].value == 25.0  # the input is left alone
    with pytest.raises(ValueError, match="empty"):
        ranking_value([])
