"""UK Carbon Intensity API (NESO): Great Britain, national and regional, no key.

Zone keys:

- ``GB``: national. Latest is ``/intensity`` (the measured ``actual`` when published,
  else the forecast, flagged estimated); forecast ``/intensity/{from}/fw48h``;
  history ``/intensity/{from}/pt24h``.
- ``GB-REGION-<id>`` with the API's region ids (:data:`REGIONS`), e.g.
  ``GB-REGION-13`` for London. Regional data is forecast only, so every regional
  reading is flagged estimated. Latest ``/regional/regionid/{id}``; forecast
  ``/regional/intensity/{from}/fw48h/regionid/{id}``; history the same with
  ``pt24h``.

Values are gCO2/kWh of generation (average signal), in half-hour slots.

Config section ``ukgrid``: ``url`` (env ``UKGRID_API_URL``; default
``https://api.carbonintensity.org.uk``), ``timeout_seconds``, ``retries``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from webhook.model import catalog
from webhook.model.errors import ProviderError, ZoneNotSupported
from webhook.model.intensity import Reading, Signal, utcnow
from webhook.model.options import NetworkOptions, base_url, parse
from webhook.providers import wire
from webhook.providers.http import HttpClient, HttpProvider, HttpSettings

NAME = catalog.UKGRID
DEFAULT_URL = "https://api.carbonintensity.org.uk"
URL_ENV = "UKGRID_API_URL"
NATIONAL = "GB"
REGION_PREFIX = "GB-REGION-"
REGIONS = {
    1: "North Scotland", 2: "South Scotland", 3: "North West England",
    4: "North East England", 5: "Yorkshire", 6: "North Wales", 7: "South Wales",
    8: "West Midlands", 9: "East Midlands", 10: "East England", 11: "South West England",
    12: "South England", 13: "London", 14: "South East England", 15: "England",
    16: "Scotland", 17: "Wales",
}  # fmt: skip
"""Region ids of the API (zone key ``GB-REGION-<id>``)."""


class Intensity(wire.Body, frozen=True, gc=False):
    """A slot's values: the measured ``actual`` (national only, once published) and the
    ``forecast``."""

    actual: float | None = None
    forecast: float | None = None


class Slot(wire.Body, frozen=True, gc=False, rename={"start": "from", "end": "to"}):
    """One half hour; a slot with neither value is skipped."""

    intensity: Intensity
    start: str | None = None
    end: str | None = None


class Slots(wire.Body, frozen=True, gc=False):
    """Half-hour slots under ``data``: the national answer (``/intensity...``), or one
    region of a regional one."""

    data: list[Slot]


class Regional(wire.Body, frozen=True, gc=False):
    """``/regional/...regionid/{id}``: the region, or a list of it (first used)."""

    data: list[Slots] | Slots

    def slots(self) -> list[Slot]:
        """The region's slots (none for an empty list)."""
        if isinstance(self.data, Slots):
            return self.data.data
        return self.data[0].data if self.data else []


class UKGridProvider(HttpProvider):
    """Great Britain's national and regional intensity (see the module docstring)."""

    name = NAME

    def __init__(
        self,
        *,
        url: str = DEFAULT_URL,
        settings: HttpSettings | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.http = HttpClient(NAME, url, settings or HttpSettings())
        self._clock = clock

    @classmethod
    def from_options(
        cls, section: Mapping[str, Any] | None, http: HttpSettings, env: Mapping[str, str]
    ) -> UKGridProvider:
        """Build from the config section (``url``, ``timeout_seconds``, ``retries``)."""
        options = parse(section, NetworkOptions, NAME)
        url = base_url(options.url, provider=NAME, env=env, env_name=URL_ENV, default=DEFAULT_URL)
        return cls(url=url, settings=http.with_options(options))

    def zones(self) -> Sequence[str]:
        """Every zone key this provider answers for."""
        return [NATIONAL, *(f"{REGION_PREFIX}{i}" for i in REGIONS)]

    def _region(self, zone: str) -> int | None:
        """None for the national zone, else the region id; unknown zones raise."""
        if zone == NATIONAL:
            return None
        if zone.startswith(REGION_PREFIX):
            suffix = zone.removeprefix(REGION_PREFIX)
            if suffix.isdigit() and int(suffix) in REGIONS:
                return int(suffix)
        raise ZoneNotSupported(NAME, f"zone {zone!r} is not GB or GB-REGION-1..{max(REGIONS)}")

    def _from(self) -> str:
        return self._clock().strftime("%Y-%m-%dT%H:%MZ")

    def _slot(self, zone: str, slot: Slot, what: str, *, forecast: bool) -> Reading | None:
        actual = None if forecast else wire.number(slot.intensity.actual)
        value = actual if actual is not None else wire.number(slot.intensity.forecast)
        if value is None:
            return None
        return Reading(
            zone=zone,
            value=value,
            signal=Signal.AVERAGE,
            valid_from=wire.timestamp(slot.start, NAME, what),
            valid_to=wire.timestamp(slot.end, NAME, what),
            estimated=actual is None,
            source=f"{NAME}:{'actual' if actual is not None else 'forecast'}",
        )

    async def _series(self, zone: str, kind: str) -> list[Reading]:
        region = self._region(zone)
        if region is None:
            path = "intensity" if kind == "latest" else f"intensity/{self._from()}/{kind}"
            body = await self.http.get_json(path, zone=zone)
            slots = wire.decode(body, Slots, NAME, self.http.where(path)).data
        else:
            path = (
                f"regional/regionid/{region}"
                if kind == "latest"
                else f"regional/intensity/{self._from()}/{kind}/regionid/{region}"
            )
            body = await self.http.get_json(path, zone=zone)
            slots = wire.decode(body, Regional, NAME, self.http.where(path)).slots()
        what = self.http.where(path)
        found = (self._slot(zone, s, what, forecast=kind == "fw48h") for s in slots)
        return sorted((r for r in found if r is not None), key=lambda r: r.valid_from)

    async def latest(self, zone: str) -> Reading:
        readings = await self._series(zone, "latest")
        if not readings:
            raise ProviderError(NAME, f"no intensity for zone {zone} in the current half hour")
        return readings[-1]

    async def forecast(self, zone: str) -> Sequence[Reading]:
        return await self._series(zone, "fw48h")

    async def history(self, zone: str) -> Sequence[Reading]:
        """The past 24 hours (national: actual where published; regional: forecast)."""
        return await self._series(zone, "pt24h")
