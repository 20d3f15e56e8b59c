"""Zones only scheduler requests name: kept warm when a provider of the chain serves them,
at most ``feed.max_requested_zones`` of them, the least recently asked dropped first with
everything held for it; the configuration's and the fleet's zones always kept."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from aiohttp import web
from prometheus_client import REGISTRY
from structlog.testing import capture_logs

from tests.feed.upstream import ENV, LATEST, config
from tests.support import Clock, FakeUpstream, Reply, em_latest
from webhook.feed import IntensityFeed
from webhook.feed.zones import requestable
from webhook.model.config import FeedConfig, parse
from webhook.model.errors import ProviderError
from webhook.model.intensity import Reading
from webhook.model.validation import InvalidInput
from webhook.providers.electricitymaps import ElectricityMapsProvider
from webhook.providers.registry import build_providers
from webhook.providers.static import StaticProvider
from webhook.providers.watttime import WattTimeProvider
from webhook.runtime.logs import REPEAT_SECONDS

NOT_SERVED = "zone not served by any provider"


def feed_of(clock: Clock, kept: Sequence[str] = ("FR",), **settings: float) -> IntensityFeed:
    """The embedded table alone, ``kept`` the configuration's zones."""
    feed_settings = FeedConfig(**settings)  # type: ignore[arg-type]
    return IntensityFeed([StaticProvider(clock)], kept, settings=feed_settings, clock=clock)


def sample(name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


async def test_a_zone_no_provider_serves_is_refused_and_never_fetched(clock: Clock) -> None:
    feed = feed_of(clock)
    refused = sample("carbonshift_requested_zones_refused_total", reason="not_served") or 0.0
    for zone in ("YY-00001", "UK", "x" * 10_000):
        assert feed.ask(zone) == NOT_SERVED
    assert feed.ask("DE") is None  # a row of the embedded table
    await feed.refresh_once()
    assert feed.zones() == {"FR", "DE"}
    assert sorted(feed.table()) == ["DE", "FR"]
    assert sample("carbonshift_requested_zones_refused_total", reason="not_served") == refused + 3


async def test_at_most_the_limit_and_the_least_recently_asked_goes_first(clock: Clock) -> None:
    feed = feed_of(clock, max_requested_zones=2, refresh_seconds=60)
    assert [feed.ask(z) for z in ("FR", "DE", "PL")] == [None, None, None]  # FR: kept
    assert feed.ask("NL") == "over the limit of 2 requested zones"  # DE, PL asked just now
    await feed.refresh_once()
    assert sample("carbonshift_intensity_age_seconds", zone="DE") is not None
    clock.advance(seconds=30)
    assert feed.ask("DE") is None  # asked again: now PL is the least recently asked
    clock.advance(seconds=31)  # PL not asked for refresh_seconds: it may go
    assert feed.ask("NL") is None
    assert feed.requested() == ["DE", "NL"]
    assert feed.get("PL") is None  # forgotten with all that was held for it
    assert sample("carbonshift_intensity_age_seconds", zone="PL") is None
    assert sample("carbonshift_zone_data_missing", zone="PL") is None
    assert feed.ask("PL") == "over the limit of 2 requested zones"
    await feed.refresh_once()
    assert sorted(feed.table()) == ["DE", "FR", "NL"]
    assert sample("carbonshift_requested_zones") == 2


async def test_no_requested_zone_at_all_with_a_limit_of_zero(clock: Clock) -> None:
    feed = feed_of(clock, max_requested_zones=0)
    assert feed.ask("DE") == "over the limit of 0 requested zones"
    assert feed.ask("FR") is None
    assert feed.zones() == {"FR"}


async def test_a_zone_the_fleet_names_is_kept_and_not_counted(clock: Clock) -> None:
    feed = feed_of(clock, max_requested_zones=1)
    assert feed.ask("DE") is None
    feed.want("DE")  # a Karmada Cluster in DE joined the fleet
    assert feed.requested() == []
    assert feed.ask("PL") is None
    feed.want("XX")  # kept whatever the providers say (reported missing)
    await feed.refresh_once()
    assert feed.zones() == {"FR", "DE", "PL", "XX"}
    assert feed.missing() == ["XX"]


def test_what_each_provider_serves_for_requests() -> None:
    doc = {
        "providers": ["electricitymaps", "watttime", "ukgrid", "static"],
        "electricitymaps": {"zones": ["XX"]},
        "watttime": {"regions": {"US-CAL-CISO": "CAISO_NORTH"}},
    }
    serves = requestable(build_providers(parse(doc), env=ENV))
    electricitymaps, watttime = serves["electricitymaps"], serves["watttime"]
    assert electricitymaps is not None
    assert {"FR", "DE", "PL", "US-CAL-CISO", "XX"} <= electricitymaps
    assert "IN" in electricitymaps  # the table's rows are all Electricity Maps keys
    assert "IN-MH" not in electricitymaps  # but a zone it retired (2022 row) is not asked
    assert watttime == frozenset({"US-CAL-CISO", "CAISO_NORTH"})
    assert serves["ukgrid"] == frozenset({"GB", *(f"GB-REGION-{i}" for i in range(1, 18))})
    assert serves["static"] is not None
    assert {"IN", "IN-MH"} <= serves["static"]


def test_the_electricitymaps_zones_option_takes_zone_keys() -> None:
    with pytest.raises(InvalidInput, match=r"electricitymaps\.zones\[1\]"):
        parse({"electricitymaps": {"zones": ["XX", "not a zone"]}})
    (provider,) = build_providers(
        parse({"providers": ["electricitymaps"], "electricitymaps": {"zones": ["XX"]}}), env=ENV
    )
    assert isinstance(provider, ElectricityMapsProvider)
    assert "XX" in provider.known_zones()
    (watttime,) = build_providers(parse({"providers": ["watttime"]}), env=ENV)
    assert isinstance(watttime, WattTimeProvider)
    assert watttime.known_zones() == frozenset()


async def test_a_requested_zone_is_asked_of_the_providers_that_serve_it_only(
    fake: FakeUpstream, clock: Clock
) -> None:
    def latest(request: web.Request) -> Reply:
        return Reply(em_latest(request.query["zone"], 400.0, clock.hour()))

    fake.on(LATEST, latest)
    doc = config(fake, "electricitymaps", "static")
    feed = IntensityFeed.from_config(doc, ["XX"], env=ENV, clock=clock)
    try:
        assert feed.ask("IN-MH") is None  # a zone Electricity Maps retired: static only
        assert feed.ask("PL") is None  # an Electricity Maps zone
        await feed.refresh_once()
        asked = sorted(s.query["zone"] for s in fake.seen if s.path == LATEST)
        assert asked == ["PL", "XX"]  # XX: the configuration's, asked of the whole chain
        assert feed.status("IN-MH").provider == "static"
        assert feed.status("PL").provider == "electricitymaps"
    finally:
        await feed.stop()


class Failing:
    """A provider down for every zone."""

    name = "failing"
    worst_case_seconds = 1.0

    async def latest(self, zone: str) -> Reading:
        raise ProviderError(self.name, "503 from upstream")

    async def forecast(self, zone: str) -> list[Reading]:
        return []

    async def history(self, zone: str) -> list[Reading]:
        return []

    async def close(self) -> None:
        return None


async def test_a_failure_that_comes_back_every_refresh_is_logged_once_per_period(
    clock: Clock,
) -> None:
    feed = IntensityFeed(
        [Failing()], ["DE"], settings=FeedConfig(error_backoff_seconds=30), clock=clock
    )
    with capture_logs() as logs:
        for _ in range(10):  # a retry every 30 s for 5 minutes
            await feed.refresh_once()
            clock.advance(seconds=30)
        clock.advance(seconds=REPEAT_SECONDS)
        await feed.refresh_once()
    failed = [e for e in logs if e["event"] == "provider_failed"]
    missing = [e for e in logs if e["event"] == "zone_data_missing"]
    assert [e.get("repeated") for e in failed] == [None, 9]
    assert len(missing) == 1
    await feed.stop()


async def test_a_dropped_zone_asked_again_is_not_said_missing_again_within_the_period(
    clock: Clock,
) -> None:
    feed = IntensityFeed(
        [Failing()], [], settings=FeedConfig(max_requested_zones=1, refresh_seconds=1), clock=clock
    )
    with capture_logs() as logs:
        for zone in ("A", "B") * 5:  # each drops the other
            assert feed.ask(zone) is None
            await feed.refresh_once()
            clock.advance(seconds=2)
    missing = [e["zone"] for e in logs if e["event"] == "zone_data_missing"]
    failed = [e["zone"] for e in logs if e["event"] == "provider_failed"]
    assert (missing, failed) == (["A", "B"], ["A", "B"])
    assert feed.zones() == {"B"}
    await feed.stop()


def test_the_limit_is_a_feed_key() -> None:
    assert FeedConfig().max_requested_zones == 300
    assert parse({"feed": {"max_requested_zones": 5}}).feed.max_requested_zones == 5
    with pytest.raises(InvalidInput, match=r"feed\.max_requested_zones"):
        parse({"feed": {"max_requested_zones": -1}})
