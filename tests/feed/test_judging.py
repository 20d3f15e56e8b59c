"""The feed judges the provider's forecasts against the day-ahead profile by how they rank
the hours, keeps what it needs for that (bounded), and ``best`` follows the judgement."""

from __future__ import annotations

import dataclasses
import math
import random
import tracemalloc
from datetime import UTC, datetime, timedelta

import pytest
from aiohttp import web
from prometheus_client import REGISTRY

from tests.feed.upstream import ENV, FORECAST, LATEST, config
from tests.support import Clock, FakeUpstream, Reply, em_latest, reading
from webhook.decision import seasonal
from webhook.decision.forecast import Method, history_needed, outlook
from webhook.decision.forecast_quality import MIN_WINDOWS
from webhook.feed import IntensityFeed
from webhook.feed.history import DAYS, ISSUE_HOURS, JUDGE_DAYS, History, Issues
from webhook.feed.judging import PROFILE, PROVIDER, SEASONAL, Judge, judge
from webhook.feed.memory import Memory
from webhook.model.intensity import Reading

T0 = datetime(2026, 3, 1, 0, tzinfo=UTC)
H = timedelta(hours=1)


def grid(hours: int, seed: int = 7) -> list[float]:
    """A daily cycle whose depth and timing change from day to day (weather): the profile
    gets its shape roughly right, a provider that knows the day gets it exactly."""
    rng = random.Random(seed)
    days = [(rng.uniform(40, 160), rng.uniform(-4, 4)) for _ in range(hours // 24 + 3)]
    out = []
    for h in range(hours):
        depth, lag = days[h // 24]
        out.append(400 - depth * math.cos(2 * math.pi * (h % 24 - 13 - lag) / 24) + rng.gauss(0, 8))
    return out


def kept(values: list[float], *, shuffled: bool = False, seed: int = 3) -> Memory:
    """A memory holding ``values`` as em's DE history, and em's forecasts issued each hour:
    the coming hours exactly, or the same values in a random order."""
    memory = Memory(["em"], timedelta(hours=2))
    rng = random.Random(seed)
    for i, value in enumerate(values):
        memory.history._held.setdefault(("em", "DE"), {})[T0 + i * H] = value
        ahead = values[i : i + ISSUE_HOURS + 1]
        if shuffled:
            rest = ahead[1:]
            rng.shuffle(rest)
            ahead = [ahead[0], *rest]
        memory.issues.add("em", "DE", T0 + i * H, ahead)
    return memory


def test_the_provider_wins_when_its_forecasts_rank_the_hours_better() -> None:
    values = grid(DAYS * 24)
    judged = Judge(kept(values)).judgement("em", "DE", 24)
    profile, provider = judged.quality[PROFILE], judged.quality["provider"]
    assert provider.windows == profile.windows == JUDGE_DAYS * 24 - 24 - 1
    assert provider.top == 1.0
    assert provider.spearman == pytest.approx(1.0)
    assert 0.3 < profile.spearman < 0.95
    assert judged.compared[PROFILE] == profile
    assert judged.compared[PROVIDER] == provider
    assert judged.chosen == "provider"


def test_the_profile_stays_when_the_providers_forecasts_are_shuffled() -> None:
    values = grid(DAYS * 24)
    judged = Judge(kept(values, shuffled=True)).judgement("em", "DE", 24)
    assert abs(judged.quality["provider"].spearman) < 0.2
    assert judged.quality[PROFILE].spearman > 0.3
    assert judged.chosen == PROFILE


def test_too_few_windows_or_a_tie_keep_the_profile() -> None:
    values = grid(DAYS * 24)
    memory = kept(values)
    first, series = memory.history.timeline("em", "DE")
    issues = memory.issues.held("em", "DE")
    # Just under the minimum of windows both forecast: the profile, however good the provider.
    hours = MIN_WINDOWS - 1 + 24 + 1
    short = judge("DE", "em", first, series, issues, window=24, keep_hours=hours)
    assert short.compared[PROVIDER].windows == MIN_WINDOWS - 1
    assert short.compared[PROVIDER].spearman == pytest.approx(1.0)
    assert short.chosen == PROFILE
    enough = judge("DE", "em", first, series, issues, window=24, keep_hours=hours + 1)
    assert enough.chosen == "provider"
    # The provider's forecast is the profile's own: a tie.
    assert first is not None
    need = history_needed(Method.PROFILE, 24)
    profile_issues = {
        first + i * H: outlook(Method.PROFILE, series[max(0, i + 1 - need) : i + 1], 24)
        for i in range(24, len(series))
    }
    tie = judge("DE", "em", first, series, profile_issues, window=24)
    assert tie.compared[PROVIDER].windows >= MIN_WINDOWS
    assert tie.compared[PROFILE] == tie.compared[PROVIDER]
    assert tie.chosen == PROFILE


def test_nothing_to_judge_without_history() -> None:
    judged = Judge(Memory(["em"], timedelta(hours=2))).judgement("em", "DE", 6)
    assert judged.quality[PROFILE].windows == judged.quality["provider"].windows == 0
    assert judged.chosen == PROFILE
    with pytest.raises(ValueError, match="window"):
        judge("DE", "em", None, [], {}, window=0)


def test_the_ring_of_issues_is_bounded_in_time_and_memory() -> None:
    issues = Issues()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for hour in range(30 * 24):  # a month of hourly issues, each forecasting three days
        issues.add("em", "DE", T0 + hour * H + 17 * timedelta(minutes=1), [1.0] * 72)
        issues.add("em", "DE", T0 + hour * H + 40 * timedelta(minutes=1), [2.0] * 72)
    used = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    held = issues.held("em", "DE")
    assert issues.count() == len(held) == JUDGE_DAYS * 24
    assert min(held) == T0 + (30 - JUDGE_DAYS) * 24 * H
    assert all(len(v) == ISSUE_HOURS + 1 and v[0] == 2.0 for v in held.values())  # latest wins
    # 168 issues of 49 doubles (392 bytes) plus their keys and arrays' headers: < 150 KB.
    assert used < 150_000, used


def test_the_history_holds_what_recomputing_the_profile_needs() -> None:
    history = History()
    for hour in range(40 * 24):
        history._held.setdefault(("em", "DE"), {})[T0 + hour * H] = float(hour)
        history._trim(history._held[("em", "DE")])
    first, series = history.timeline("em", "DE")
    assert len(series) == DAYS * 24 + 1
    assert first == T0 + (40 * 24 - len(series)) * H


def truth(at: datetime) -> float:
    """The grid of :func:`grid`, by the hour (from T0)."""
    return VALUES[int((at - START) / H)]


START = datetime(2026, 3, 1, 10, tzinfo=UTC)
VALUES = grid(24 * 8)


def _serve(fake: FakeUpstream, clock: Clock, *, shuffled: bool) -> None:
    rng = random.Random(5)

    def latest(_: web.Request) -> Reply:
        return Reply(em_latest("DE", truth(clock.hour()), clock.hour()))

    def forecast(_: web.Request) -> Reply:
        hours = [clock.hour() + k * H for k in range(1, 49)]
        values = [truth(h) for h in hours]
        if shuffled:
            rng.shuffle(values)
        points = [
            {"carbonIntensity": v, "datetime": h.isoformat()}
            for h, v in zip(hours, values, strict=True)
        ]
        return Reply({"zone": "DE", "forecast": points})

    fake.on(LATEST, latest)
    fake.on(FORECAST, forecast)


@pytest.mark.parametrize("shuffled", [False, True], ids=["exact", "shuffled"])
async def test_best_follows_the_choice(fake: FakeUpstream, shuffled: bool) -> None:
    """Electricity Maps (its wire format, from a local server) forecasting the coming hours
    exactly wins once it was judged on enough windows; shuffled, the profile stays."""
    clock = Clock(START + 20 * timedelta(minutes=1))
    _serve(fake, clock, shuffled=shuffled)
    feed = IntensityFeed.from_config(
        config(fake, "electricitymaps", forecasts=True), ["DE"], env=ENV, clock=clock
    )
    await feed.refresh_once()
    for _ in range(24 * 6 - 2):
        clock.advance(hours=1)
        await feed.refresh_once(force=True)
    judged = feed.quality("DE")
    assert judged is not None
    assert judged.provider == "electricitymaps"
    assert judged.compared[PROVIDER].windows >= MIN_WINDOWS
    best = feed.outlook("DE", 24, "best")
    assert best is not None
    if shuffled:
        assert judged.chosen == PROFILE
        assert best == feed.outlook("DE", 24, Method.PROFILE)
        assert best != feed.outlook("DE", 24, "provider")
    else:
        assert judged.chosen == "provider"
        assert judged.quality["provider"].spearman == pytest.approx(1.0)
        assert best == feed.outlook("DE", 24, "provider")
        assert best != feed.outlook("DE", 24, Method.PROFILE)
    chosen = "provider" if not shuffled else PROFILE
    other = PROFILE if not shuffled else "provider"
    sample = REGISTRY.get_sample_value
    assert sample("carbonshift_forecast_choice", {"zone": "DE", "forecaster": chosen}) == 1
    assert sample("carbonshift_forecast_choice", {"zone": "DE", "forecaster": other}) == 0
    windows = sample("carbonshift_forecast_rank_windows", {"zone": "DE", "forecaster": "provider"})
    assert windows == judged.quality["provider"].windows
    rho = sample("carbonshift_forecast_rank_quality", {"zone": "DE", "forecaster": PROFILE})
    assert rho == pytest.approx(judged.quality[PROFILE].spearman)
    await feed.stop()


async def test_best_keeps_the_profile_until_enough_windows(fake: FakeUpstream) -> None:
    clock = Clock(START + 20 * timedelta(minutes=1))
    _serve(fake, clock, shuffled=False)
    feed = IntensityFeed.from_config(
        config(fake, "electricitymaps", forecasts=True), ["DE"], env=ENV, clock=clock
    )
    await feed.refresh_once()
    assert feed.outlook("DE", 24, "best") is None  # the profile has less than a day yet
    for _ in range(30):
        clock.advance(hours=1)
        await feed.refresh_once(force=True)
    judged = feed.quality("DE")
    assert judged is not None
    assert 0 < judged.quality["provider"].windows < MIN_WINDOWS
    assert judged.chosen == PROFILE
    assert feed.outlook("DE", 24, "best") == feed.outlook("DE", 24, Method.PROFILE)
    assert feed.quality("XX") is None
    await feed.stop()


def test_judging_hour_by_hour_is_judging_all_at_once() -> None:
    """The judge scores each new hour's window once and forgets the oldest: the same
    figures as judging the kept days from scratch."""
    values = grid(DAYS * 24 + 60)
    memory = Memory(["em"], timedelta(hours=2))
    judging = Judge(memory)
    for i, value in enumerate(values):
        memory.history.add("em", _at(i, value))
        memory.issues.add("em", "DE", T0 + i * H, values[i : i + 25])
        if i % 7 == 0 or i == len(values) - 1:
            step = judging.judgement("em", "DE", 12)
            first, series = memory.history.timeline("em", "DE")
            whole = judge("DE", "em", first, series, memory.issues.held("em", "DE"), window=12)
            assert step == whole
    assert step.quality["provider"].windows == JUDGE_DAYS * 24 - 13


def _at(i: int, value: float) -> Reading:
    return reading("DE", value, valid_from=T0 + i * H, valid_to=T0 + (i + 1) * H)


def shifted(hours: int, *, moved_on_day: int, seed: int = 11) -> list[float]:
    """A daily dip at 13:00 that moves to 03:00 from ``moved_on_day`` on (a new tariff, a
    season's change): a two-week profile still averages the old shape in, a fit on the
    last week has the new one."""
    rng = random.Random(seed)
    out = []
    for h in range(hours):
        dip = 13 if h // 24 < moved_on_day else 3
        out.append(400 - 120 * math.cos(2 * math.pi * (h % 24 - dip) / 24) + rng.gauss(0, 8))
    return out


def test_the_seasonal_forecaster_wins_where_it_ranks_the_hours_better() -> None:
    values = shifted(DAYS * 24, moved_on_day=DAYS - 12)
    first = T0
    judged = judge("DE", "em", first, values, {}, window=24)
    profile, fitted = judged.compared[PROFILE], judged.compared[SEASONAL]
    assert fitted.windows == profile.windows >= MIN_WINDOWS
    assert fitted.spearman > profile.spearman + 0.05
    assert judged.chosen == SEASONAL
    assert judged.quality[PROVIDER].windows == 0


def test_the_profile_stays_where_the_seasonal_forecaster_ranks_no_better() -> None:
    values = grid(DAYS * 24)  # the day's depth and timing change at random: the fit chases noise
    judged = judge("DE", "em", T0, values, {}, window=24)
    assert judged.compared[SEASONAL].windows == judged.compared[PROFILE].windows >= MIN_WINDOWS
    assert judged.compared[SEASONAL].spearman <= judged.compared[PROFILE].spearman + 0.01
    assert judged.chosen == PROFILE
    # Too few windows: the profile, however well the seasonal forecaster ranks.
    moved = shifted(DAYS * 24, moved_on_day=DAYS - 12)
    short = judge("DE", "em", T0, moved, {}, window=24, keep_hours=MIN_WINDOWS - 1 + 24 + 1)
    assert short.compared[SEASONAL].windows == MIN_WINDOWS - 1
    assert short.chosen == PROFILE


def test_the_judge_kept_hour_by_hour_picks_the_seasonal_forecaster_too() -> None:
    memory = Memory(["em"], timedelta(hours=2))
    values = shifted(DAYS * 24, moved_on_day=DAYS - 12)
    for i, value in enumerate(values):
        memory.history.add("em", _at(i, value))
    assert Judge(memory).judgement("em", "DE", 24).chosen == SEASONAL


async def test_best_answers_with_the_seasonal_forecaster_when_the_judge_picks_it(
    fake: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock(START + 20 * timedelta(minutes=1))
    _serve(fake, clock, shuffled=True)
    feed = IntensityFeed.from_config(
        config(fake, "electricitymaps", forecasts=True), ["DE"], env=ENV, clock=clock
    )
    await feed.refresh_once()
    for _ in range(50):
        clock.advance(hours=1)
        await feed.refresh_once(force=True)
    judged = feed.quality("DE")
    assert judged is not None
    assert judged.chosen == PROFILE
    assert feed.outlook("DE", 24, "best") == feed.outlook("DE", 24, Method.PROFILE)
    picked = dataclasses.replace(judged, chosen=SEASONAL)
    monkeypatch.setattr(Judge, "judgement", lambda *_: picked)
    seasonal = feed.outlook("DE", 24, Method.SEASONAL)
    assert seasonal is not None
    assert seasonal != feed.outlook("DE", 24, Method.PROFILE)
    assert feed.outlook("DE", 24, "best") == seasonal
    await feed.stop()


@pytest.mark.parametrize("judged", [False, True], ids=["default", "feed.seasonal"])
def test_the_feed_fits_the_seasonal_forecaster_only_when_told(
    fake: FakeUpstream, monkeypatch: pytest.MonkeyPatch, judged: bool
) -> None:
    """Its fits would run on the event loop that answers admissions: off by default."""
    fits: list[int] = []
    fit = seasonal.fitted

    def counted(window: tuple[float, ...]) -> tuple[float, ...]:
        fits.append(len(window))
        return fit(window)

    monkeypatch.setattr(seasonal, "fitted", counted)
    settings = {"seasonal": True} if judged else {}
    feed = IntensityFeed.from_config(config(fake, "electricitymaps", **settings), ["DE"], env=ENV)
    memory = Memory(["em"], timedelta(hours=2))
    for i, value in enumerate(shifted(DAYS * 24, moved_on_day=DAYS - 12)):
        memory.history.add("em", _at(i, value))
    as_the_feed_judges = Judge(memory, seasonal=feed.settings.seasonal)
    judgement = as_the_feed_judges.judgement("em", "DE", 24)
    assert (judgement.quality[SEASONAL].windows > 0) is judged
    assert judgement.chosen == (SEASONAL if judged else PROFILE)
    assert bool(fits) is judged, fits
    assert (Method.SEASONAL in feed._judge.built) is judged  # the feed's own judge is so told


def test_the_judge_keeps_each_forecasters_errors_hour_by_hour_ahead() -> None:
    """What ``nodepools.pause_confidence`` reads: the signed errors of the windows judged."""
    same_day = [100.0 + 50.0 * math.sin(h * math.pi / 12) for h in range(24)]
    memory = Memory(["em"], timedelta(hours=2))
    for i, value in enumerate(same_day * DAYS):  # every day alike: the profile is exact
        memory.history.add("em", _at(i, value))
    judging = Judge(memory, seasonal=False)
    windows = judging.judgement("em", "DE", 24).quality[PROFILE].windows
    spread = judging.spread("em", "DE", 24, PROFILE)
    assert windows > 0
    assert spread is not None
    assert [len(e) for e in spread.errors] == [windows] * 24
    assert all(abs(e) < 1e-9 for ahead in spread.errors for e in ahead)
    assert spread.bound(6, 120.0, 0.9) == pytest.approx(120.0)  # no error: no margin
    assert judging.spread("em", "DE", 24, PROVIDER) is None  # no issue was kept
    noisy = Memory(["em"], timedelta(hours=2))
    for i, value in enumerate(grid(DAYS * 24)):
        noisy.history.add("em", _at(i, value))
    wide = Judge(noisy, seasonal=False).spread("em", "DE", 24, PROFILE)
    assert wide is not None
    assert wide.bound(6, 120.0, 0.9) > 120.0  # errors both ways: a margin at 90 %
