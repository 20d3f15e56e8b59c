"""The feed: TTL from validity, single flight, error backoff, staleness and fallback."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from aiohttp import web
from structlog.testing import capture_logs

from tests.feed.upstream import ENV, FORECAST, LATEST, config
from tests.support import Clock, FakeUpstream, Reply, em_latest, eventually
from webhook.feed import IntensityFeed
from webhook.feed.cache import Entry, IntensityCache
from webhook.model.config import Config, FeedConfig, parse
from webhook.model.intensity import Reading, Signal


def serve_hourly(fake: FakeUpstream, clock: Clock, values: dict[str, float]) -> None:
    """Latest answers: the current hour of ``clock`` with a per-zone value."""

    def latest(request: web.Request) -> Reply:
        zone = request.query["zone"]
        return Reply(em_latest(zone, values[zone], clock.hour()))

    fake.on(LATEST, latest)


async def test_one_upstream_call_per_zone_per_validity_window(
    fake: FakeUpstream, clock: Clock
) -> None:
    serve_hourly(fake, clock, {"DE": 300, "FR": 50})
    feed = IntensityFeed.from_config(
        config(fake, "electricitymaps"), ["DE", "FR"], env=ENV, clock=clock
    )
    for _ in range(3):
        await feed.refresh_once()
        clock.advance(minutes=10)  # 10:20 .. 10:50, all inside the 10:00-11:00 window
    assert fake.calls[LATEST] == 2
    assert feed.get("DE") is not None
    assert feed.get("DE").value == 300  # type: ignore[union-attr]
    clock.now = datetime(2026, 3, 1, 11, 0, 1, tzinfo=UTC)
    await feed.refresh_once()
    assert fake.calls[LATEST] == 4
    assert feed.get("FR").valid_from == datetime(2026, 3, 1, 11, tzinfo=UTC)  # type: ignore[union-attr]
    await feed.stop()


async def test_concurrent_misses_make_one_call(fake: FakeUpstream, clock: Clock) -> None:
    fake.on(LATEST, Reply(em_latest("DE", 300, clock.hour()), delay=0.2))
    feed = IntensityFeed.from_config(config(fake, "electricitymaps"), ["DE"], env=ENV, clock=clock)
    await asyncio.gather(*(feed.refresh_once() for _ in range(20)))
    assert fake.calls[LATEST] == 1
    assert feed.get("DE") is not None
    await feed.stop()


async def test_fallback_says_which_provider_answered_and_why(
    fake: FakeUpstream, clock: Clock
) -> None:
    fake.on(LATEST, Reply({}, status=401))
    feed = IntensityFeed.from_config(
        config(fake, "electricitymaps", "static"), ["DE"], env=ENV, clock=clock
    )
    await feed.refresh_once()
    status = feed.status("DE")
    assert status.provider == "static"
    assert status.reading is not None
    assert status.reading.source.startswith("static:")
    assert "401" in status.problems["electricitymaps"]
    assert feed.ready
    await feed.stop()


async def test_errors_are_cached_for_the_backoff_only(fake: FakeUpstream, clock: Clock) -> None:
    fake.on(LATEST, Reply({}, status=500))
    feed = IntensityFeed.from_config(
        config(fake, "electricitymaps", error_backoff_seconds=30),
        ["DE"],
        env=ENV,
        clock=clock,
    )
    await feed.refresh_once()
    await feed.refresh_once()
    assert fake.calls[LATEST] == 1
    assert feed.missing() == ["DE"]
    clock.advance(seconds=31)
    fake.on(LATEST, Reply(em_latest("DE", 280, clock.hour())))
    await feed.refresh_once()
    assert fake.calls[LATEST] == 2
    assert feed.missing() == []
    await feed.stop()


async def test_stale_while_revalidate_then_next_provider(fake: FakeUpstream, clock: Clock) -> None:
    serve_hourly(fake, clock, {"DE": 300})
    feed = IntensityFeed.from_config(
        config(fake, "electricitymaps", "static", max_age_seconds=600),
        ["DE"],
        env=ENV,
        clock=clock,
    )
    await feed.refresh_once()
    assert feed.status("DE").provider == "electricitymaps"
    fake.on(LATEST, Reply({}, status=503))  # outage from here on
    clock.now = datetime(2026, 3, 1, 11, 5, tzinfo=UTC)
    await feed.refresh_once()
    reading = feed.get("DE")
    assert reading is not None
    assert reading.source.startswith("electricitymaps")  # 5 min old: still served
    assert not reading.stale
    clock.now = datetime(2026, 3, 1, 11, 11, tzinfo=UTC)  # 11 min past its period
    assert feed.stale() == ["DE"]
    await feed.refresh_once()
    status = feed.status("DE")
    assert status.provider == "static"
    assert status.reading is not None
    assert not status.reading.stale
    assert "503" in status.problems["electricitymaps"]
    await feed.stop()


async def test_only_provider_too_old_is_served_flagged_stale(
    fake: FakeUpstream, clock: Clock
) -> None:
    serve_hourly(fake, clock, {"DE": 300})
    feed = IntensityFeed.from_config(
        config(fake, "electricitymaps", max_age_seconds=600), ["DE"], env=ENV, clock=clock
    )
    await feed.refresh_once()
    fake.on(LATEST, Reply(body=b"not json"))
    clock.now = datetime(2026, 3, 1, 12, tzinfo=UTC)
    await feed.refresh_once()
    reading = feed.get("DE")
    assert reading is not None
    assert reading.stale
    assert reading.value == 300
    assert feed.table()["DE"].stale
    assert feed.missing() == []
    await feed.stop()


async def test_snapshot_is_reused_until_a_reading_changes_or_turns_stale(
    fake: FakeUpstream, clock: Clock
) -> None:
    values = {"DE": 300.0}
    serve_hourly(fake, clock, values)
    feed = IntensityFeed.from_config(
        config(fake, "electricitymaps", max_age_seconds=600), ["DE"], env=ENV, clock=clock
    )
    await feed.refresh_once()
    first = feed.snapshot()
    clock.advance(minutes=5)
    assert feed.snapshot() is first  # nothing changed: no recomputation
    clock.now = clock.hour() + timedelta(hours=1, minutes=10, seconds=1)  # 10 min past its end
    fake.on(LATEST, Reply(body=b"not json"))
    stale = feed.snapshot()
    assert stale.generation == first.generation + 1
    assert stale.table["DE"].stale
    assert not first.table["DE"].stale
    serve_hourly(fake, clock, values)
    await feed.refresh_once()  # a new reading for the current hour
    fresh = feed.snapshot()
    assert fresh.generation == stale.generation + 1
    assert not fresh.table["DE"].stale
    await feed.stop()


async def test_percentile_is_never_ranked_and_the_chain_falls_back(
    fake: FakeUpstream, clock: Clock
) -> None:
    fake.on("/login", Reply({"token": "jwt"}))
    fake.on("/v3/forecast", Reply({}, status=403))
    fake.on(
        "/v3/signal-index",
        Reply(
            {
                "data": [{"point_time": "2026-03-01T10:15:00+00:00", "value": 96.0}],
                "meta": {"units": "percentile", "region": "CAISO_NORTH"},
            }
        ),
    )
    feed = IntensityFeed.from_config(
        config(fake, "watttime", "static"), ["US-CAL-CISO"], env=ENV, clock=clock
    )
    with capture_logs() as logs:
        await feed.refresh_once()
    status = feed.status("US-CAL-CISO")
    assert status.provider == "static"
    assert "percentile" in status.problems["watttime"]
    warnings = [e for e in logs if e["log_level"] == "warning"]
    assert any("percentile" in str(e.get("reason", "")) for e in warnings)
    await feed.stop()


async def test_mean_over_horizon_from_forecast(fake: FakeUpstream, clock: Clock) -> None:
    clock.now = datetime(2026, 3, 1, 10, 30, tzinfo=UTC)
    fake.on(LATEST, Reply(em_latest("DE", 300, clock.hour())))
    hours = [datetime(2026, 3, 1, 11 + i, tzinfo=UTC) for i in range(4)]
    points = [
        {"carbonIntensity": v, "datetime": h.isoformat()}
        for h, v in zip(hours, (100, 200, 300, 400), strict=True)
    ]
    fake.on(FORECAST, Reply({"zone": "DE", "forecast": points}))
    feed = IntensityFeed.from_config(
        config(fake, "electricitymaps", forecasts=True), ["DE"], env=ENV, clock=clock
    )
    await feed.refresh_once()
    mean = feed.mean_over("DE", timedelta(hours=4))
    assert mean is not None
    # 10:30-11:00 latest 300, then 100, 200, 300, and 14:00-14:30 at 400.
    assert mean.value == pytest.approx((0.5 * 300 + 100 + 200 + 300 + 0.5 * 400) / 4)
    assert mean.estimated
    assert mean.signal is Signal.AVERAGE
    assert mean.source == "electricitymaps:lifecycle+forecast"
    assert len(feed.forecast("DE")) == 4
    # Partial forecast: one hour of a 6 h horizon is too little to call it a mean.
    clock.advance(hours=4)
    assert feed.mean_over("DE", timedelta(hours=6)) is None
    await feed.stop()


async def test_static_has_no_forecast_mean(clock: Clock) -> None:
    feed = IntensityFeed.from_config(Config(), ["DE"], clock=clock)
    await feed.refresh_once()
    assert feed.get("DE") is not None
    assert feed.mean_over("DE", timedelta(hours=4)) is None
    await feed.stop()


async def test_want_wakes_the_refresher() -> None:
    feed = IntensityFeed.from_config(Config(), [])
    await feed.start()
    assert feed.ready
    feed.want("FR")
    await eventually(lambda: feed.get("FR") is not None, "FR fetched", seen=feed.zones)
    assert feed.get("FR") is not None
    assert feed.zones() == {"FR"}
    await feed.stop()


async def test_memory_cache_holds_bytes_not_live_objects() -> None:
    cache = IntensityCache.memory()
    now = datetime(2026, 3, 1, tzinfo=UTC)
    reading = Reading("DE", 1.0, Signal.AVERAGE, now, now + timedelta(hours=1), False, "x")
    entry = Entry("p", "latest", "DE", (reading,), now, now + timedelta(hours=1))
    await cache.put("k", entry, 60)
    got = await cache.get("k")
    assert got == entry
    assert got is not entry
    failed = Entry("p", "latest", "DE", (), now, now, error="p: down", error_type="RateLimited")
    await cache.put("e", failed, 60)
    again = await cache.get("e")
    assert again is not None
    assert type(again.exception()).__name__ == "RateLimited"
    assert str(again.exception()) == "p: down"
    assert await cache.acquire("k", "a", 5)
    assert not await cache.acquire("k", "b", 5)
    await cache.release("k", "b")  # not the holder: no effect
    assert not await cache.acquire("k", "b", 5)
    await cache.release("k", "a")
    assert await cache.acquire("k", "b", 5)
    await cache.close()


def test_feed_config_keys() -> None:
    feed = parse({"feed": {"timeout_seconds": 2, "retries": 0, "forecasts": False}}).feed
    assert feed == FeedConfig(timeout_seconds=2.0, retries=0, forecasts=False)
    with pytest.raises(ValueError, match=r"feed\.retries"):
        parse({"feed": {"retries": 99}})
    with pytest.raises(ValueError, match=r"feed\.max_ttl_seconds"):
        parse({"feed": {"min_ttl_seconds": 100, "max_ttl_seconds": 10}})
    with pytest.raises(ValueError, match=r"feed\.colour"):
        parse({"feed": {"colour": 1}})


def test_redis_url_validation() -> None:
    with pytest.raises(ValueError, match="CARBONSHIFT_REDIS_URL"):
        IntensityCache.from_env({"CARBONSHIFT_REDIS_URL": "http://127.0.0.1"})
    cache = IntensityCache.from_env({"CARBONSHIFT_REDIS_URL": "redis://:pw-secret@127.0.0.1:1/2"})
    assert cache.shared
    assert "pw-secret" not in repr(cache)
    assert IntensityCache.from_env({}).description == "memory"
