"""The intensity feed: readings for every zone in use, kept in memory.

Request handlers only ever call the synchronous lookups (:meth:`IntensityFeed.table`,
:meth:`IntensityFeed.get`); all provider I/O happens in the background refresher.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime

import structlog

from webhook.intensity import IntensityTable, Reading, utcnow
from webhook.providers.base import Provider, ProviderError

log = structlog.get_logger("carbonshift.feed")


class IntensityFeed:
    """Latest reading per zone, refreshed in the background through a provider chain.

    For each zone the providers are tried in order; the first that answers wins. A
    reading whose period ended more than ``max_age_seconds`` ago is served with
    ``stale=True`` until a fresh one arrives.
    """

    def __init__(
        self,
        providers: Sequence[Provider],
        zones: Iterable[str] = (),
        *,
        refresh_seconds: float = 300.0,
        max_age_seconds: float = 7200.0,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        if not providers:
            raise ValueError("the feed needs at least one provider")
        self.providers = tuple(providers)
        self._zones: set[str] = set(zones)
        self._readings: dict[str, Reading] = {}
        self._refresh_seconds = refresh_seconds
        self._max_age = max_age_seconds
        self._clock = clock
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    # --- answers from memory ---------------------------------------------------------

    def get(self, zone: str) -> Reading | None:
        """The reading for ``zone``, flagged stale when too old; None if never loaded."""
        reading = self._readings.get(zone)
        if reading is None:
            return None
        age = (self._clock() - reading.valid_to).total_seconds()
        if age > self._max_age and not reading.stale:
            return dataclasses.replace(reading, stale=True)
        return reading

    def table(self) -> IntensityTable:
        """Every loaded zone's reading (see :meth:`get`)."""
        return {zone: r for zone in self._readings if (r := self.get(zone)) is not None}

    def zones(self) -> frozenset[str]:
        """Zones the refresher keeps warm."""
        return frozenset(self._zones)

    def missing(self) -> list[str]:
        """Zones in use that have no reading yet."""
        return sorted(self._zones - self._readings.keys())

    @property
    def ready(self) -> bool:
        """True once every zone in use has a reading."""
        return not self.missing()

    def want(self, zone: str) -> None:
        """Start keeping ``zone`` warm; the refresher fetches it soon, never the caller."""
        if zone not in self._zones:
            self._zones.add(zone)
            self._wake.set()

    # --- background -------------------------------------------------------------------

    async def refresh_once(self) -> None:
        """Ask the provider chain for every zone in use (concurrently)."""
        zones = sorted(self._zones)
        results = await asyncio.gather(*(self._fetch(z) for z in zones))
        for zone, reading in zip(zones, results, strict=True):
            if reading is not None:
                self._readings[zone] = reading

    async def _fetch(self, zone: str) -> Reading | None:
        for provider in self.providers:
            try:
                return await provider.latest(zone)
            except ProviderError as exc:
                log.info("provider_skipped", zone=zone, provider=provider.name, reason=str(exc))
        log.warning("zone_without_data", zone=zone)
        return None

    async def start(self) -> None:
        """Load every zone once, then keep refreshing in the background."""
        await self.refresh_once()
        self._task = asyncio.create_task(self._run(), name="intensity-refresh")

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._refresh_seconds)
            self._wake.clear()
            try:
                await self.refresh_once()
            except Exception:  # the refresher must outlive any provider bug
                log.exception("refresh_failed")

    async def stop(self) -> None:
        """Stop refreshing and close the providers."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        for provider in self.providers:
            await provider.close()
