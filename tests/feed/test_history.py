"""The feed's hourly history and the outlook built on it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from aiohttp import web

from tests.feed.upstream import ENV, FORECAST, LATEST, config
from tests.support import Clock, FakeUpstream, Reply, em_latest, reading
from webhook.decision import forecast
from webhook.decision.forecast import Method, offered, outlook
from webhook.feed import IntensityFeed
from webhook.feed.history import (
    DAYS,
    JUDGE_DAYS,
    History,
    enough,
    epoch_hour,
    provider_outlook,
)
from webhook.model.intensity import Reading

HISTORY = "/v3/carbon-intensity/history"
T0 = datetime(2026, 3, 1, 0, tzinfo=UTC)
H = timedelta(hours=1)


def hourly(value: float, hour: float) -> Reading:
    return reading("DE", value, valid_from=T0 + hour * H, valid_to=T0 + (hour + 1) * H)


def test_one_value_per_hour_the_latest_of_the_hour() -> None:
    history = History()
    for when, value in [(0, 100), (0.5, 110), (0.9, 120), (1, 200), (1.25, 210)]:
        history.add("em", reading("DE", value, valid_from=T0 + when * H, valid_to=T0 + 2 * H))
    assert history.series("em", "DE") == [120, 210]
    assert history.series("em", "FR") == []
    assert history.series("other", "DE") == []


def test_hours_without_a_reading_repeat_the_hour_before() -> None:
    history = History()
    for hour, value in [(0, 100), (3, 400)]:
        history.add("em", hourly(value, hour))
    assert history.series("em", "DE") == [100, 100, 100, 400]


def test_the_history_is_bounded_to_the_profile_days_a_day_the_days_judged_and_now() -> None:
    history = History()
    for hour in range(900):
        history.add("em", hourly(float(hour), hour))
    series = history.series("em", "DE")
    assert DAYS == forecast.DAYS + 1 + JUDGE_DAYS
    assert len(series) == DAYS * 24 + 1
    assert series[0] == 900 - DAYS * 24 - 1
    assert series[-1] == 899


def test_no_outlook_without_enough_history() -> None:
    history = History()
    for hour in range(24):
        history.add("em", hourly(float(hour), hour))
    assert history.outlook("em", "DE", 24, Method.PROFILE) is None
    assert history.outlook("em", "DE", 24, Method.PERSISTENCE) == [23.0] * 25
    assert history.outlook("em", "FR", 24, Method.PERSISTENCE) is None
    history.add("em", hourly(24.0, 24))
    assert enough(Method.PROFILE, 24) == 25
    assert history.outlook("em", "DE", 24, Method.PROFILE) is not None


def test_the_outlook_is_the_decision_cores_forecast_over_the_held_hours() -> None:
    history = History()
    values = [300 + 100 * ((h % 24) < 12) + h % 5 for h in range(600)]
    for hour, value in enumerate(values):
        history.add("em", hourly(float(value), hour))
    held = [float(v) for v in values[-((forecast.DAYS + 1) * 24 + 1) :]]  # what it reads
    now = epoch_hour(T0) + len(values) - 1  # the clock the seasonal forecaster fits daily on
    for method in offered():
        assert history.outlook("em", "DE", 24, method) == outlook(method, held, 24, at=now)


def test_the_feeds_clock_is_hours_since_the_epoch() -> None:
    assert epoch_hour(datetime(1970, 1, 2, 5, 59, tzinfo=UTC)) == 29
    assert epoch_hour(T0) % 24 == 0  # whole days: the seasonal forecaster fits at midnight UTC


def test_provider_outlook_is_hourly_up_to_the_first_gap() -> None:
    now = T0 + 20 * H / 60
    latest = reading("DE", 300, valid_from=T0, valid_to=T0 + H)
    periods = [
        reading("DE", v, valid_from=T0 + k * H, valid_to=T0 + (k + 1) * H)
        for k, v in [(1, 100), (2, 200), (4, 400)]
    ]
    assert provider_outlook(periods, latest, now, 6) == [300, 100, 200]
    assert provider_outlook([], latest, now, 6) is None


async def test_the_feed_keeps_history_as_readings_arrive(fake: FakeUpstream, clock: Clock) -> None:
    def latest(_: web.Request) -> Reply:
        return Reply(em_latest("DE", 100 + clock.hour().hour, clock.hour()))

    fake.on(LATEST, latest)
    points = [
        {"carbonIntensity": 50 + i, "datetime": (clock.hour() + (i + 1) * H).isoformat()}
        for i in range(30)
    ]
    fake.on(FORECAST, Reply({"zone": "DE", "forecast": points}))
    feed = IntensityFeed.from_config(
        config(fake, "electricitymaps", forecasts=True), ["DE"], env=ENV, clock=clock
    )
    await feed.refresh_once()
    assert feed.outlook("DE", 24, Method.PROFILE) is None  # one hour is not enough
    assert feed.outlook("DE", 2, Method.PERSISTENCE) == [110, 110, 110]
    assert feed.outlook("DE", 3, "provider") == [110, 50, 51, 52]
    assert feed.outlook("DE", 3, None) is None
    for _ in range(3):
        clock.advance(hours=1)
        await feed.refresh_once(force=True)
    assert feed.outlook("DE", 1, Method.PERSISTENCE) == [113, 113]
    assert feed.outlook("XX", 1, Method.PERSISTENCE) is None
    await feed.stop()


async def test_a_started_feed_seeds_its_history_with_the_providers_past_day(
    fake: FakeUpstream, clock: Clock
) -> None:
    """Electricity Maps' ``carbon-intensity/history`` (the past 24 h) fills the hourly
    history at once, so the day-ahead profile forecasts right after a start; the live
    reading keeps its hour, and the past day is not asked again once a day is held."""
    now = clock.hour()
    fake.on(LATEST, Reply(em_latest("DE", 300, now)))
    past = [em_latest("DE", 100 + k, now - k * H) for k in range(24, 0, -1)]
    past.append(em_latest("DE", 999, now))  # the current hour: the live reading wins
    fake.on(HISTORY, Reply({"zone": "DE", "history": past}))
    feed = IntensityFeed.from_config(config(fake, "electricitymaps"), ["DE"], env=ENV, clock=clock)
    await feed.refresh_once()
    ahead = feed.outlook("DE", 23, Method.PROFILE)
    assert ahead is not None
    assert ahead[0] == 300
    # A day back from now + 1 h is 23 h ago (value 123), shifted towards now (300).
    assert 123 < ahead[1] < 300
    asked = sum(s.path == HISTORY for s in fake.seen)
    clock.advance(hours=1)
    await feed.refresh_once(force=True)
    assert sum(s.path == HISTORY for s in fake.seen) == asked  # a day is held: not asked again
    await feed.stop()


async def test_without_past_readings_the_feed_waits_for_a_day_of_its_own(
    fake: FakeUpstream, clock: Clock
) -> None:
    fake.on(LATEST, Reply(em_latest("DE", 300, clock.hour())))
    fake.on(HISTORY, Reply({"error": "not in this plan"}, status=403))
    feed = IntensityFeed.from_config(config(fake, "electricitymaps"), ["DE"], env=ENV, clock=clock)
    await feed.refresh_once()
    assert feed.outlook("DE", 23, Method.PROFILE) is None
    assert feed.get("DE") is not None  # the latest reading is unaffected
    await feed.stop()
