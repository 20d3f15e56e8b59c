"""WattTime v3 against a local server: login, bearer refresh, MOER units, percentiles."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from tests.providers.failing import BODY, refused
from tests.support import Clock, FakeUpstream, Reply
from webhook.model.credentials import Secret
from webhook.model.errors import AuthenticationFailed, IncomparableSignal, ProviderError
from webhook.model.intensity import Signal
from webhook.model.validation import InvalidInput
from webhook.providers.http import HttpSettings
from webhook.providers.watttime import (
    LBS_PER_MWH_TO_G_PER_KWH,
    TOKEN_LIFETIME,
    WattTimeProvider,
)

USER, PASSWORD = "wt-user", "wt-pass-91c2"
START = datetime(2026, 3, 1, 10, tzinfo=UTC)


def envelope(values: list[float], units: str = "lbs_co2_per_mwh") -> dict[str, Any]:
    return {
        "data": [
            {"point_time": (START + timedelta(minutes=5 * i)).isoformat(), "value": v}
            for i, v in enumerate(values)
        ],
        "meta": {
            "data_point_period_seconds": 300,
            "region": "CAISO_NORTH",
            "signal_type": "co2_moer",
            "units": units,
            "warnings": [],
            "model": {"date": "2023-03-01"},
        },
    }


@pytest.fixture
def wt(fake: FakeUpstream, fast: HttpSettings, clock: Clock) -> WattTimeProvider:
    fake.on("/login", Reply({"token": "jwt-1"}), Reply({"token": "jwt-2"}))
    return WattTimeProvider(
        Secret(USER),
        Secret(PASSWORD),
        url=fake.url,
        regions={"US-CAL-CISO": "CAISO_NORTH"},
        settings=fast,
        monotonic=clock.monotonic,
    )


async def test_login_then_forecast_first_point_in_g_per_kwh(
    fake: FakeUpstream, wt: WattTimeProvider
) -> None:
    fake.on("/v3/forecast", Reply(envelope([1000, 900, 800])))
    reading = await wt.latest("US-CAL-CISO")
    assert reading.value == pytest.approx(1000 * LBS_PER_MWH_TO_G_PER_KWH)
    assert reading.signal is Signal.MARGINAL
    assert reading.valid_from == START
    assert reading.valid_to == START + timedelta(minutes=5)
    login = fake.seen[0]
    assert login.path == "/login"
    assert base64.b64decode(login.headers["Authorization"].split()[1]).decode() == (
        f"{USER}:{PASSWORD}"
    )
    data = fake.seen[1]
    assert data.headers["Authorization"] == "Bearer jwt-1"
    assert data.query == {"region": "CAISO_NORTH", "signal_type": "co2_moer"}
    forecast = await wt.forecast("US-CAL-CISO")
    assert [round(r.value, 1) for r in forecast] == [453.6, 408.2, 362.9]
    assert all(r.estimated for r in forecast)
    assert fake.calls["/login"] == 1  # the token is reused
    await wt.close()


async def test_token_is_renewed_before_it_expires(
    fake: FakeUpstream, wt: WattTimeProvider, clock: Clock
) -> None:
    fake.on("/v3/forecast", Reply(envelope([1000])))
    await wt.latest("CAISO_NORTH")
    clock.advance(seconds=TOKEN_LIFETIME - 60)  # one minute before expiry: inside the margin
    await wt.latest("CAISO_NORTH")
    assert fake.calls["/login"] == 2
    assert fake.seen[-1].headers["Authorization"] == "Bearer jwt-2"
    await wt.close()


async def test_401_on_data_logs_in_again_once(fake: FakeUpstream, wt: WattTimeProvider) -> None:
    fake.on("/v3/forecast", Reply({}, status=401), Reply(envelope([500])))
    reading = await wt.latest("CAISO_NORTH")
    assert reading.value == pytest.approx(500 * LBS_PER_MWH_TO_G_PER_KWH)
    assert fake.calls["/login"] == 2
    await wt.close()


async def test_bad_password_is_authentication_failed(
    fake: FakeUpstream, wt: WattTimeProvider
) -> None:
    fake.on("/login", Reply({"error": "bad credentials"}, status=401))
    with pytest.raises(AuthenticationFailed) as info:
        await wt.latest("CAISO_NORTH")
    assert "WATTTIME_USERNAME" in str(info.value)
    assert PASSWORD not in str(info.value)
    await wt.close()


async def test_percentile_only_is_incomparable_and_warns(
    fake: FakeUpstream, wt: WattTimeProvider
) -> None:
    fake.on("/v3/forecast", Reply({"error": "no access"}, status=403))
    fake.on("/v3/signal-index", Reply(envelope([96.0], units="percentile")))
    with capture_logs() as logs, pytest.raises(IncomparableSignal, match="percentile"):
        await wt.latest("PSCO")
    assert any(e["event"] == "incomparable_signal" for e in logs)
    assert await wt.signal_index("PSCO") == 96.0
    await wt.close()


async def test_empty_forecast_uses_historical(fake: FakeUpstream, wt: WattTimeProvider) -> None:
    fake.on("/v3/forecast", Reply(envelope([])))
    fake.on("/v3/historical", Reply(envelope([700, 710])))
    reading = await wt.latest("CAISO_NORTH")
    assert reading.value == pytest.approx(710 * LBS_PER_MWH_TO_G_PER_KWH)
    query = fake.seen[-1].query
    assert query["start"].endswith("+00:00")
    assert query["end"].endswith("+00:00")
    await wt.close()


def test_options(tmp_path: Path, fast: HttpSettings) -> None:
    secret = tmp_path / "password"
    secret.write_text(PASSWORD)
    env = {"WATTTIME_USERNAME": USER, "WATTTIME_PASSWORD_FILE": str(secret)}
    wt = WattTimeProvider.from_options({"url": "http://127.0.0.1:9"}, fast, env=env)
    assert wt.http.base_url == "http://127.0.0.1:9"
    assert PASSWORD not in repr(wt)
    assert repr(Secret(PASSWORD)) == "Secret('***')"
    with pytest.raises(InvalidInput, match=r"watttime\.password_file.*WATTTIME_PASSWORD"):
        WattTimeProvider.from_options({}, fast, env={"WATTTIME_USERNAME": USER})
    with pytest.raises(InvalidInput, match="do not put credentials"):
        WattTimeProvider.from_options({"password": PASSWORD}, fast, env=env)
    with pytest.raises(InvalidInput, match=r"watttime\.regions"):
        WattTimeProvider.from_options({"regions": ["CAISO_NORTH"]}, fast, env=env)
    with pytest.raises(InvalidInput, match="cannot read the credential file"):
        WattTimeProvider.from_options(
            {"password_file": str(tmp_path / "missing")}, fast, env={"WATTTIME_USERNAME": USER}
        )


async def test_wrong_typed_fields_are_refused_without_the_body(
    fake: FakeUpstream, wt: WattTimeProvider
) -> None:
    body = envelope([1000])
    body["data"][0]["value"] = BODY
    fake.on("/v3/forecast", Reply(body))
    await refused(wt.latest("CAISO_NORTH"), "watttime", "data[0].value: expected float | null")
    fake.on("/v3/forecast", Reply({**envelope([1000]), "meta": None}))
    await refused(wt.latest("CAISO_NORTH"), "watttime", "meta: expected object")
    await wt.close()


async def test_a_login_without_a_token_is_refused(fake: FakeUpstream, fast: HttpSettings) -> None:
    fake.on("/login", Reply({"token": 91}), Reply({"token": ""}))
    wt = WattTimeProvider(Secret(USER), Secret(PASSWORD), url=fake.url, settings=fast)
    for _ in range(2):
        with pytest.raises(
            ProviderError, match=r"watttime: unexpected response from .*login"
        ) as info:
            await wt.latest("CAISO_NORTH")
        assert PASSWORD not in str(info.value)
    assert "/v3/forecast" not in fake.calls
    await wt.close()


async def test_signal_index_needs_a_value(fake: FakeUpstream, wt: WattTimeProvider) -> None:
    fake.on("/v3/signal-index", Reply({"data": []}), Reply(envelope([-4.0], units="percentile")))
    for _ in range(2):
        with pytest.raises(ProviderError, match="watttime: unexpected response"):
            await wt.signal_index("PSCO")
    await wt.close()


async def test_missing_meta_and_odd_periods_mean_five_minutes(
    fake: FakeUpstream, wt: WattTimeProvider
) -> None:
    body = envelope([1000, None])  # type: ignore[list-item]
    del body["meta"]
    fake.on("/v3/forecast", Reply(body))
    (reading,) = await wt.forecast("CAISO_NORTH")
    assert reading.valid_to - reading.valid_from == timedelta(minutes=5)
    body = envelope([1000])
    body["meta"]["data_point_period_seconds"] = 0
    fake.on("/v3/forecast", Reply(body))
    reading = await wt.latest("CAISO_NORTH")
    assert reading.valid_to - reading.valid_from == timedelta(minutes=5)
    await wt.close()
