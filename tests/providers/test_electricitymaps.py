"""Electricity Maps v3 against a local server speaking its documented wire format."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.providers.failing import BODY, refused
from tests.support import FakeUpstream, Reply, em_latest, iso
from webhook.model.credentials import Secret
from webhook.model.errors import (
    AuthenticationFailed,
    CircuitOpen,
    ProviderError,
    RateLimited,
    ZoneNotSupported,
)
from webhook.model.intensity import Signal
from webhook.model.validation import InvalidInput
from webhook.providers.electricitymaps import ElectricityMapsProvider
from webhook.providers.http import HttpSettings

TOKEN = "em-test-token-7f3a"
HOUR = datetime(2026, 3, 1, 10, tzinfo=UTC)
LATEST = "/v3/carbon-intensity/latest"
FORECAST = "/v3/carbon-intensity/forecast"
HISTORY = "/v3/carbon-intensity/history"


@pytest.fixture
def em(fake: FakeUpstream, fast: HttpSettings) -> ElectricityMapsProvider:
    return ElectricityMapsProvider(Secret(TOKEN), url=f"{fake.url}/v3", settings=fast)


async def test_latest_sends_token_header_and_parses_reading(
    fake: FakeUpstream, em: ElectricityMapsProvider
) -> None:
    fake.on(LATEST, Reply(em_latest("DE", 322, HOUR, isEstimated=True)))
    reading = await em.latest("DE")
    assert reading.value == 322
    assert reading.signal is Signal.AVERAGE
    assert reading.valid_from == HOUR
    assert reading.valid_to == HOUR + timedelta(hours=1)
    assert reading.estimated
    assert reading.source == "electricitymaps:lifecycle"
    seen = fake.seen[0]
    assert seen.headers["auth-token"] == TOKEN
    assert seen.query["zone"] == "DE"
    assert seen.query["emissionFactorType"] == "lifecycle"
    assert seen.query["shouldUseFallbackCallerLookup"] == "false"
    await em.close()


async def test_granularity_sets_validity(fake: FakeUpstream, em: ElectricityMapsProvider) -> None:
    fake.on(LATEST, Reply(em_latest("DE", 300, HOUR, temporalGranularity="5_minutes")))
    reading = await em.latest("DE")
    assert reading.valid_to - reading.valid_from == timedelta(minutes=5)
    await em.close()


async def test_null_latest_falls_back_to_newest_history_hour(
    fake: FakeUpstream, em: ElectricityMapsProvider
) -> None:
    fake.on(LATEST, Reply(em_latest("NL", None, HOUR)))
    history = [
        em_latest("NL", 250, HOUR - timedelta(hours=2)),
        em_latest("NL", 240, HOUR - timedelta(hours=1)),
        em_latest("NL", None, HOUR),
    ]
    fake.on(HISTORY, Reply({"zone": "NL", "history": history}))
    reading = await em.latest("NL")
    assert reading.value == 240
    assert reading.valid_from == HOUR - timedelta(hours=1)
    await em.close()


async def test_partial_forecast_skips_missing_hours(
    fake: FakeUpstream, em: ElectricityMapsProvider
) -> None:
    points = [
        {"carbonIntensity": 100, "datetime": "2026-03-01T11:00:00+00:00"},
        {"carbonIntensity": None, "datetime": "2026-03-01T12:00:00+00:00"},
        {"carbonIntensity": 120, "datetime": "2026-03-01T13:00:00+00:00"},
    ]
    fake.on(FORECAST, Reply({"zone": "DE", "forecast": points, "updatedAt": iso(HOUR)}))
    forecast = await em.forecast("DE")
    assert [r.value for r in forecast] == [100, 120]
    assert all(r.estimated for r in forecast)
    await em.close()


async def test_401_is_authentication_failed_not_retried_and_says_what_to_fix(
    fake: FakeUpstream, em: ElectricityMapsProvider
) -> None:
    fake.on(LATEST, Reply({"message": "Invalid token"}, status=401))
    with pytest.raises(AuthenticationFailed) as info:
        await em.latest("DE")
    assert fake.calls[LATEST] == 1
    assert "ELECTRICITY_MAPS_API_TOKEN" in str(info.value)
    assert "not an outage" in str(info.value)
    assert TOKEN not in str(info.value)
    assert em.http.breaker.state == "closed"
    await em.close()


async def test_429_short_retry_after_is_slept_through(
    fake: FakeUpstream, em: ElectricityMapsProvider
) -> None:
    fake.on(
        LATEST,
        Reply({}, status=429, headers={"Retry-After": "0.1"}),
        Reply(em_latest("DE", 300, HOUR)),
    )
    started = time.monotonic()
    reading = await em.latest("DE")
    assert reading.value == 300
    assert time.monotonic() - started >= 0.1
    assert fake.calls[LATEST] == 2
    await em.close()


async def test_429_long_retry_after_blocks_calls_until_then(
    fake: FakeUpstream, em: ElectricityMapsProvider
) -> None:
    fake.on(LATEST, Reply({}, status=429, headers={"Retry-After": "120"}))
    with pytest.raises(RateLimited) as info:
        await em.latest("DE")
    assert info.value.retry_after == 120
    with pytest.raises(RateLimited):
        await em.latest("FR")
    assert fake.calls[LATEST] == 1  # the second call never left the process
    await em.close()


async def test_500_is_retried_then_opens_the_circuit(
    fake: FakeUpstream, em: ElectricityMapsProvider
) -> None:
    fake.on(LATEST, Reply({"error": "boom"}, status=500))
    with pytest.raises(ProviderError, match="answered 500") as info:
        await em.latest("DE")
    assert not isinstance(info.value, CircuitOpen)
    assert fake.calls[LATEST] == 3  # 1 + 2 retries; breaker_failures=3 opens it
    with pytest.raises(CircuitOpen):
        await em.latest("DE")
    assert fake.calls[LATEST] == 3
    await em.close()


async def test_breaker_half_open_trial_closes_on_success(
    fake: FakeUpstream, fast: HttpSettings
) -> None:
    em = ElectricityMapsProvider(Secret(TOKEN), url=f"{fake.url}/v3", settings=fast)
    fake.on(LATEST, Reply({}, status=503))
    with pytest.raises(ProviderError):
        await em.latest("DE")
    em.http.breaker.reset_seconds = 0.0  # the reset time has passed
    fake.on(LATEST, Reply(em_latest("DE", 310, HOUR)))
    assert (await em.latest("DE")).value == 310
    assert em.http.breaker.state == "closed"
    await em.close()


async def test_malformed_json_is_an_error(fake: FakeUpstream, em: ElectricityMapsProvider) -> None:
    fake.on(LATEST, Reply(body=b"{not json"))
    with pytest.raises(ProviderError, match="not JSON"):
        await em.latest("DE")
    assert fake.calls[LATEST] == 3
    await em.close()


async def test_wrong_shape_is_an_error(fake: FakeUpstream, em: ElectricityMapsProvider) -> None:
    fake.on(LATEST, Reply({"zone": "DE", "carbonIntensity": 5, "datetime": 17}))
    with pytest.raises(ProviderError, match="unexpected response"):
        await em.latest("DE")
    await em.close()


async def test_timeout(fake: FakeUpstream, em: ElectricityMapsProvider) -> None:
    fake.on(LATEST, Reply(em_latest("DE", 1, HOUR), delay=1.0))
    started = time.monotonic()
    with pytest.raises(ProviderError, match="timed out"):
        await em.latest("DE")
    assert time.monotonic() - started < 2.0  # 3 x 0.3 s + backoff, not 3 x 1 s
    await em.close()


async def test_unknown_zone(fake: FakeUpstream, em: ElectricityMapsProvider) -> None:
    fake.on(LATEST, Reply({"error": "Zone 'XX' does not exist."}, status=404))
    with pytest.raises(ZoneNotSupported):
        await em.latest("XX")
    fake.on(LATEST, Reply(em_latest("FR", 50, HOUR)))
    with pytest.raises(ZoneNotSupported, match="got data for FR"):
        await em.latest("DE")
    await em.close()


def test_options(tmp_path: Path, fast: HttpSettings) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    em = ElectricityMapsProvider.from_options(
        {"token_file": str(token_file), "url": "http://127.0.0.1:1/free-tier/"}, fast, env={}
    )
    assert em.http.url("carbon-intensity/latest") == (
        "http://127.0.0.1:1/free-tier/carbon-intensity/latest"
    )
    assert TOKEN not in repr(em)
    env = {"ELECTRICITY_MAPS_API_TOKEN": TOKEN, "ELECTRICITY_MAPS_API_URL": "http://127.0.0.1:2"}
    em = ElectricityMapsProvider.from_options({"emission_factor": "direct"}, fast, env=env)
    assert em.emission_factor == "direct"
    assert em.http.base_url == "http://127.0.0.1:2"
    with pytest.raises(InvalidInput, match=r"electricitymaps\.token_file.*ELECTRICITY_MAPS"):
        ElectricityMapsProvider.from_options({}, fast, env={})
    with pytest.raises(InvalidInput, match="do not put credentials"):
        ElectricityMapsProvider.from_options({"token": TOKEN}, fast, env={})
    with pytest.raises(InvalidInput, match=r"electricitymaps\.url") as info:
        ElectricityMapsProvider.from_options(
            {"url": f"https://user:{TOKEN}@example.test"}, fast, env=env
        )
    assert TOKEN not in str(info.value)
    with pytest.raises(InvalidInput, match=r"electricitymaps\.colour"):
        ElectricityMapsProvider.from_options({"colour": "green"}, fast, env=env)
    with pytest.raises(InvalidInput, match=r"electricitymaps\.emission_factor"):
        ElectricityMapsProvider.from_options({"emission_factor": "lca"}, fast, env=env)
    with pytest.raises(InvalidInput, match=r"electricitymaps\.timeout_seconds"):
        ElectricityMapsProvider.from_options({"timeout_seconds": -1}, fast, env=env)


async def test_wrong_typed_fields_are_refused_without_the_body(
    fake: FakeUpstream, em: ElectricityMapsProvider
) -> None:
    fake.on(LATEST, Reply(em_latest("DE", BODY, HOUR)))  # type: ignore[arg-type]
    await refused(em.latest("DE"), "electricitymaps", "carbonIntensity: expected float | null")
    history = [em_latest("DE", 250, HOUR), em_latest("DE", 240, HOUR, isEstimated=BODY)]
    fake.on(HISTORY, Reply({"zone": "DE", "history": history}))
    await refused(em.history("DE"), "electricitymaps", "history[1].isEstimated")
    fake.on(FORECAST, Reply({"zone": "DE", "forecast": {BODY: 1}}))
    await refused(em.forecast("DE"), "electricitymaps", "forecast: expected array")
    await em.close()


async def test_null_and_negative_history_hours_are_left_out(
    fake: FakeUpstream, em: ElectricityMapsProvider
) -> None:
    history = [
        em_latest("DE", 250, HOUR - timedelta(hours=2), surprise={"new": "field"}),
        {"carbonIntensity": None},  # no value: the other fields are not read
        em_latest("DE", -1, HOUR),
    ]
    fake.on(HISTORY, Reply({"zone": "DE", "history": history}))
    assert [r.value for r in await em.history("DE")] == [250]
    await em.close()
