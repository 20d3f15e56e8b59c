"""Electricity Maps API v3: average (consumption-based) intensity per zone.

Endpoints used (paths below the base URL, which includes the version, e.g.
``https://api.electricitymap.org/v3``): ``carbon-intensity/latest``,
``carbon-intensity/forecast`` and ``carbon-intensity/history``. Authentication is the
``auth-token`` header. Zone keys are Electricity Maps' own (``DE``, ``US-CAL-CISO``).

Config section ``electricitymaps``:

- ``url``: base URL (env ``ELECTRICITY_MAPS_API_URL``); default
  ``https://api.electricitymap.org/v3``.
- ``token_file``: file holding the token (a mounted Secret); else env
  ``ELECTRICITY_MAPS_API_TOKEN_FILE`` or ``ELECTRICITY_MAPS_API_TOKEN``.
- ``emission_factor``: ``lifecycle`` (the API default) or ``direct``.
- ``timeout_seconds``, ``retries``: override the ``feed`` defaults.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from webhook.model import catalog
from webhook.model.credentials import Secret, resolve_secret
from webhook.model.errors import ProviderError, ZoneNotSupported
from webhook.model.intensity import Reading, Signal
from webhook.model.options import base_url, parse
from webhook.model.validation import InvalidInput
from webhook.providers import wire
from webhook.providers.http import HttpClient, HttpProvider, HttpSettings

NAME = catalog.ELECTRICITYMAPS
TOKEN_ENV = catalog.ELECTRICITYMAPS_TOKEN_ENV
Options = catalog.ElectricityMapsOptions
DEFAULT_URL = "https://api.electricitymap.org/v3"
URL_ENV = "ELECTRICITY_MAPS_API_URL"
CALLS_PER_FETCH = 2
"""HTTP requests one :meth:`ElectricityMapsProvider.latest` may make (latest, then history)."""


_GRANULARITY = {
    "5_minutes": timedelta(minutes=5),
    "15_minutes": timedelta(minutes=15),
    "hourly": timedelta(hours=1),
}


class ElectricityMapsProvider(HttpProvider):
    """Latest, forecast and last-24-hour history from the Electricity Maps API."""

    name = NAME
    calls_per_fetch = CALLS_PER_FETCH

    def __init__(
        self,
        token: Secret,
        *,
        url: str = DEFAULT_URL,
        emission_factor: str = "lifecycle",
        settings: HttpSettings | None = None,
    ) -> None:
        self._token = token
        self.emission_factor = emission_factor
        self.http = HttpClient(
            NAME,
            url,
            settings or HttpSettings(),
            auth_hint=f"check the token ({TOKEN_ENV} or {NAME}.token_file) and that its plan "
            "covers this zone and endpoint (a free key covers one zone, no forecast)",
        )

    @classmethod
    def from_options(
        cls, section: Mapping[str, Any] | None, http: HttpSettings, env: Mapping[str, str]
    ) -> ElectricityMapsProvider:
        """Build from the config section and environment (see the module docstring)."""
        options = parse(section, Options, NAME)
        token = resolve_secret(
            key=f"{NAME}.token", literal=options.token, file=options.token_file,
            env_name=TOKEN_ENV, env=env,
        )  # fmt: skip
        if token is None:
            raise InvalidInput(
                f"{NAME}.token_file",
                f"no API token: set {TOKEN_ENV} (or {TOKEN_ENV}_FILE) or token_file "
                "to a file holding it",
            )
        return cls(
            token,
            url=base_url(
                options.url, provider=NAME, env=env, env_name=URL_ENV, default=DEFAULT_URL
            ),
            emission_factor=options.emission_factor,
            settings=http.with_options(options),
        )

    async def _get(self, path: str, zone: str) -> Mapping[str, Any]:
        body = await self.http.get_json(
            path,
            params={
                "zone": zone,
                "emissionFactorType": self.emission_factor,
                "shouldUseFallbackCallerLookup": "false",
            },
            headers={"auth-token": self._token.reveal()},
            zone=zone,
        )
        data = wire.obj(body, NAME, self.http.where(path))
        answered = data.get("zone")
        if isinstance(answered, str) and answered != zone:
            raise ZoneNotSupported(NAME, f"asked for zone {zone}, got data for {answered}")
        return data

    def _reading(
        self, zone: str, item: Any, what: str, *, step: timedelta, forecast: bool = False
    ) -> Reading | None:
        entry = wire.obj(item, NAME, what)
        value = wire.number(entry.get("carbonIntensity"))
        if value is None:
            return None
        start: datetime = wire.timestamp(entry.get("datetime"), NAME, what)
        granularity = entry.get("temporalGranularity")
        if isinstance(granularity, str) and granularity in _GRANULARITY:
            step = _GRANULARITY[granularity]
        return Reading(
            zone=zone,
            value=value,
            signal=Signal.AVERAGE,
            valid_from=start,
            valid_to=start + step,
            estimated=forecast or entry.get("isEstimated") is True,
            source=f"{NAME}:{entry.get('emissionFactorType') or self.emission_factor}",
        )

    async def latest(self, zone: str) -> Reading:
        path = "carbon-intensity/latest"
        data = await self._get(path, zone)
        reading = self._reading(zone, data, self.http.where(path), step=timedelta(hours=1))
        if reading is not None:
            return reading
        # The latest hour has no value yet (carbonIntensity: null): newest known hour.
        history = await self.history(zone)
        if not history:
            raise ProviderError(NAME, f"no intensity value for zone {zone} in the last 24 hours")
        return history[-1]

    async def history(self, zone: str) -> Sequence[Reading]:
        """The last 24 hours, oldest first, hours without a value left out."""
        path = "carbon-intensity/history"
        data = await self._get(path, zone)
        what = self.http.where(path)
        rows = wire.items(data.get("history"), NAME, what)
        found = (self._reading(zone, r, what, step=timedelta(hours=1)) for r in rows)
        return sorted((r for r in found if r is not None), key=lambda r: r.valid_from)

    async def forecast(self, zone: str) -> Sequence[Reading]:
        path = "carbon-intensity/forecast"
        data = await self._get(path, zone)
        what = self.http.where(path)
        rows = wire.items(data.get("forecast"), NAME, what)
        found = (self._reading(zone, r, what, step=timedelta(hours=1), forecast=True) for r in rows)
        return sorted((r for r in found if r is not None), key=lambda r: r.valid_from)
