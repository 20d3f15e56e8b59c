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
- ``zones``: zone keys a scheduler request may name beyond the ones it knows already: the
  embedded table's Electricity Maps rows (:meth:`ElectricityMapsProvider.known_zones`).
- ``timeout_seconds``, ``retries``: override the ``feed`` defaults.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import timedelta
from typing import Any, TypeVar

from webhook.model import catalog
from webhook.model.credentials import Secret, resolve_secret
from webhook.model.errors import ProviderError, ZoneNotSupported
from webhook.model.intensity import Reading, Signal
from webhook.model.options import base_url, parse
from webhook.model.validation import InvalidInput
from webhook.providers import wire
from webhook.providers.http import HttpClient, HttpProvider, HttpSettings
from webhook.providers.static import annual_table

NAME = catalog.ELECTRICITYMAPS
TOKEN_ENV = catalog.ELECTRICITYMAPS_TOKEN_ENV
Options = catalog.ElectricityMapsOptions
DEFAULT_URL = "https://api.electricitymap.org/v3"
URL_ENV = "ELECTRICITY_MAPS_API_URL"
CALLS_PER_FETCH = 2
"""HTTP requests one :meth:`ElectricityMapsProvider.latest` may make (latest, then history)."""


_NEWEST_YEAR = max(row.year for row in annual_table().values())
_TABLE_ZONES = frozenset(
    row.zone
    for row in annual_table().values()
    if row.source.startswith("electricitymaps-") and row.year == _NEWEST_YEAR
)
"""Zone keys of the embedded table's rows from Electricity Maps' newest yearly data: the
zones it publishes today (the older rows are zones it has since retired, such as IN-MH)."""

_GRANULARITY = {
    "5_minutes": timedelta(minutes=5),
    "15_minutes": timedelta(minutes=15),
    "hourly": timedelta(hours=1),
}


class Point(wire.Body, frozen=True, gc=False, rename="camel"):
    """One hour of ``latest``, ``history`` or ``forecast`` (``carbonIntensity`` on the
    wire); a point with a null intensity is skipped."""

    carbon_intensity: float | None = None
    datetime: str | None = None
    temporal_granularity: str | None = None
    is_estimated: bool | None = None
    emission_factor_type: str | None = None


class Latest(Point, frozen=True, gc=False):
    """``carbon-intensity/latest``: one point and the zone it is for."""

    zone: str | None = None


class History(wire.Body, frozen=True, gc=False):
    """``carbon-intensity/history``."""

    history: list[Point]
    zone: str | None = None


class Forecast(wire.Body, frozen=True, gc=False):
    """``carbon-intensity/forecast``."""

    forecast: list[Point]
    zone: str | None = None


Answer = TypeVar("Answer", Latest, History, Forecast)


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
        zones: Collection[str] = (),
        settings: HttpSettings | None = None,
    ) -> None:
        self._token = token
        self.emission_factor = emission_factor
        self.zones_added = frozenset(zones)
        """The ``zones`` option: keys known beyond the embedded table's."""
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
            zones=options.zones,
            settings=http.with_options(options),
        )

    def known_zones(self) -> frozenset[str]:
        """The zones a scheduler request may make this provider fetch
        (:mod:`webhook.feed.zones`): the rows of the embedded table taken from Electricity
        Maps (its zone keys; every zone of the cloud region table among them) and the
        ``zones`` option. Any other key is still asked for when the configuration or the
        fleet names it."""
        return _TABLE_ZONES | self.zones_added

    async def _get(self, path: str, zone: str, kind: type[Answer]) -> tuple[Answer, str]:
        """The answer of ``path`` for ``zone`` as ``kind``, and the endpoint for errors."""
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
        what = self.http.where(path)
        data = wire.decode(body, kind, NAME, what)
        if data.zone is not None and data.zone != zone:
            raise ZoneNotSupported(NAME, f"asked for zone {zone}, got data for {data.zone}")
        return data, what

    def _reading(
        self, zone: str, point: Point, what: str, *, forecast: bool = False
    ) -> Reading | None:
        value = wire.number(point.carbon_intensity)
        if value is None:
            return None
        start = wire.timestamp(point.datetime, NAME, what)
        step = _GRANULARITY.get(point.temporal_granularity or "", timedelta(hours=1))
        return Reading(
            zone=zone,
            value=value,
            signal=Signal.AVERAGE,
            valid_from=start,
            valid_to=start + step,
            estimated=forecast or point.is_estimated is True,
            source=f"{NAME}:{point.emission_factor_type or self.emission_factor}",
        )

    def _series(
        self, zone: str, points: list[Point], what: str, *, forecast: bool
    ) -> list[Reading]:
        """The points with a value, oldest first."""
        found = (self._reading(zone, p, what, forecast=forecast) for p in points)
        return sorted((r for r in found if r is not None), key=lambda r: r.valid_from)

    async def latest(self, zone: str) -> Reading:
        data, what = await self._get("carbon-intensity/latest", zone, Latest)
        reading = self._reading(zone, data, what)
        if reading is not None:
            return reading
        # The latest hour has no value yet (carbonIntensity: null): newest known hour.
        history = await self.history(zone)
        if not history:
            raise ProviderError(NAME, f"no intensity value for zone {zone} in the last 24 hours")
        return history[-1]

    async def history(self, zone: str) -> Sequence[Reading]:
        """The last 24 hours, oldest first, hours without a value left out."""
        data, what = await self._get("carbon-intensity/history", zone, History)
        return self._series(zone, data.history, what, forecast=False)

    async def forecast(self, zone: str) -> Sequence[Reading]:
        data, what = await self._get("carbon-intensity/forecast", zone, Forecast)
        return self._series(zone, data.forecast, what, forecast=True)
