"""UK Carbon Intensity API against a local server: national, regional, forecasts."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from tests.providers.failing import BODY, refused
from tests.support import FakeUpstream, Reply
from webhook.model.errors import ProviderError, ZoneNotSupported
from webhook.providers.http import HttpSettings
from webhook.providers.ukgrid import UKGridProvider

NOW = datetime(2026, 3, 1, 10, 7, tzinfo=UTC)


def slot(start: str, end: str, forecast: int | None, actual: int | None = None) -> dict[str, Any]:
    return {
        "from": start,
        "to": end,
        "intensity": {"forecast": forecast, "actual": actual, "index": "moderate"},
    }


@pytest.fixture
def uk(fake: FakeUpstream, fast: HttpSettings) -> UKGridProvider:
    return UKGridProvider(url=fake.url, settings=fast, clock=lambda: NOW)


async def test_national_actual(fake: FakeUpstream, uk: UKGridProvider) -> None:
    fake.on(
        "/intensity", Reply({"data": [slot("2026-03-01T10:00Z", "2026-03-01T10:30Z", 266, 263)]})
    )
    reading = await uk.latest("GB")
    assert reading.value == 263
    assert not reading.estimated
    assert reading.source == "ukgrid:actual"
    assert reading.valid_from == datetime(2026, 3, 1, 10, tzinfo=UTC)
    assert reading.valid_to == datetime(2026, 3, 1, 10, 30, tzinfo=UTC)
    await uk.close()


async def test_national_without_actual_uses_forecast(
    fake: FakeUpstream, uk: UKGridProvider
) -> None:
    fake.on("/intensity", Reply({"data": [slot("2026-03-01T10:00Z", "2026-03-01T10:30Z", 266)]}))
    reading = await uk.latest("GB")
    assert reading.value == 266
    assert reading.estimated
    assert reading.source == "ukgrid:forecast"
    await uk.close()


async def test_national_forecast_is_partial_where_values_are_missing(
    fake: FakeUpstream, uk: UKGridProvider
) -> None:
    path = "/intensity/2026-03-01T10:07Z/fw48h"
    fake.on(
        path,
        Reply(
            {
                "data": [
                    slot("2026-03-01T10:00Z", "2026-03-01T10:30Z", 200),
                    slot("2026-03-01T10:30Z", "2026-03-01T11:00Z", None),
                    slot("2026-03-01T11:00Z", "2026-03-01T11:30Z", 180),
                ]
            }
        ),
    )
    forecast = await uk.forecast("GB")
    assert [r.value for r in forecast] == [200, 180]
    assert all(r.estimated for r in forecast)
    await uk.close()


async def test_regional_latest_and_forecast(fake: FakeUpstream, uk: UKGridProvider) -> None:
    region = {
        "regionid": 13,
        "dnoregion": "UKPN London",
        "shortname": "London",
        "data": [
            {
                **slot("2026-03-01T10:00Z", "2026-03-01T10:30Z", 150),
                "generationmix": [{"fuel": "gas", "perc": 40.0}],
            }
        ],
    }
    fake.on("/regional/regionid/13", Reply({"data": [region]}))
    reading = await uk.latest("GB-REGION-13")
    assert reading.value == 150
    assert reading.estimated  # regional data is forecast only
    assert reading.zone == "GB-REGION-13"
    fake.on("/regional/intensity/2026-03-01T10:07Z/fw48h/regionid/13", Reply({"data": region}))
    assert [r.value for r in await uk.forecast("GB-REGION-13")] == [150]
    await uk.close()


async def test_unknown_zones_never_reach_the_network(
    fake: FakeUpstream, uk: UKGridProvider
) -> None:
    for zone in ("DE", "GB-REGION-99", "GB-REGION-x"):
        with pytest.raises(ZoneNotSupported):
            await uk.latest(zone)
    assert not fake.calls
    assert "GB-REGION-17" in uk.zones()
    await uk.close()


async def test_empty_and_broken_answers(fake: FakeUpstream, uk: UKGridProvider) -> None:
    fake.on("/intensity", Reply({"data": []}))
    with pytest.raises(ProviderError, match="no intensity"):
        await uk.latest("GB")
    fake.on("/intensity", Reply({"data": [{"from": "x"}]}))
    with pytest.raises(ProviderError, match="unexpected response"):
        await uk.latest("GB")
    await uk.close()


async def test_wrong_typed_fields_are_refused_without_the_body(
    fake: FakeUpstream, uk: UKGridProvider
) -> None:
    broken = slot("2026-03-01T10:00Z", "2026-03-01T10:30Z", 266)
    broken["intensity"]["forecast"] = BODY
    fake.on("/intensity", Reply({"data": [broken]}))
    await refused(uk.latest("GB"), "ukgrid", "data[0].intensity.forecast: expected float | null")
    fake.on("/regional/regionid/13", Reply({"data": [BODY]}))
    await refused(uk.latest("GB-REGION-13"), "ukgrid", "data[0]: expected object")
    fake.on("/intensity", Reply({"data": [{**slot("x", "y", 266), "from": 1700000000}]}))
    await refused(uk.latest("GB"), "ukgrid", "data[0].from: expected str | null")
    await uk.close()


async def test_an_empty_regional_list_has_no_slots(fake: FakeUpstream, uk: UKGridProvider) -> None:
    fake.on("/regional/regionid/13", Reply({"data": []}))
    with pytest.raises(ProviderError, match="no intensity"):
        await uk.latest("GB-REGION-13")
    await uk.close()
