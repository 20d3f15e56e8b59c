"""The intensity feed: readings for every zone in use, kept in memory.

Request handlers only ever call the synchronous lookups (:meth:`IntensityFeed.get`,
:meth:`IntensityFeed.table`, :meth:`IntensityFeed.mean_over`,
:meth:`IntensityFeed.status`); they read plain dicts and never wait for I/O. All
provider I/O happens in the background refresher, through the cache
(:mod:`webhook.cache`):

1. For each zone in use the providers are asked in chain order. A provider whose
   in-memory answer has not expired yet is not asked again (no cache lookup either).
2. An expired answer is looked up in the cache; a fresh cache entry (fetched by this
   replica earlier or by another replica) is used as is.
3. Otherwise one fetch is made: concurrent refreshes of one key share it (single
   flight) and, with Redis, one replica holds a lease for the key while the others
   wait for its answer, so the fleet calls a provider once per zone per validity
   window. The answer is cached until its period ends (clamped to
   ``feed.min_ttl_seconds .. feed.max_ttl_seconds``); an error only for
   ``feed.error_backoff_seconds``.
4. A provider that answers with a fresh reading ends the walk down the chain; its
   forecast is refreshed the same way.

Freshness and fallback: a failed refresh keeps the last good reading
(stale-while-revalidate). Once a reading's period ended more than
``feed.max_age_seconds`` ago it is stale: :meth:`get` answers with the first provider
in the chain that has a non-stale reading, and the refresher asks the next providers.
If none has one, the newest reading is served flagged ``stale=True``. The reading's
``source`` starts with the name of the provider that answered (``electricitymaps:...``,
``static:...``), and :meth:`status` says why earlier providers did not.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import os
import socket
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta

import structlog

from webhook.cache import Entry, IntensityCache, count_lookup, entry_key
from webhook.config import Config, FeedConfig
from webhook.intensity import IntensityTable, Reading, utcnow
from webhook.metrics import (
    DATA_AGE,
    INTENSITY,
    INTENSITY_STALE,
    PROVIDER_ERRORS,
)
from webhook.providers.base import Provider, ProviderError, ZoneNotSupported

log = structlog.get_logger("carbonshift.feed")

LATEST = "latest"
FORECAST = "forecast"
MIN_COVERAGE = 0.5
""":meth:`IntensityFeed.mean_over` needs forecasts for at least this share of the horizon."""
LEASE_POLL_SECONDS = 0.05
"""How often a replica waiting for another one's fetch looks at the cache."""


@dataclasses.dataclass(frozen=True, slots=True)
class ZoneStatus:
    """Everything the feed knows about one zone, for the CLI, logs and ``/readyz``."""

    zone: str
    reading: Reading | None
    """What :meth:`IntensityFeed.get` answers (None: no provider has data)."""
    provider: str | None
    """Name of the provider that answered."""
    problems: Mapping[str, str]
    """Provider name -> why it has no current answer for the zone (last error)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Snapshot:
    """What :meth:`IntensityFeed.get` answers for every zone, frozen at one moment.

    ``generation`` grows whenever the answers change (a new reading arrived or one
    turned stale), so equal generations of one feed mean equal tables.
    """

    table: IntensityTable
    generation: int
    until: datetime
    """Last instant before a held reading turns stale (recomputed after it)."""


class IntensityFeed:
    """Latest reading and forecast per zone, refreshed in the background (module doc).

    ``providers`` is the chain, in order. ``settings`` holds the ``feed`` config
    section; ``refresh_seconds``/``max_age_seconds`` override it when given. ``cache``
    defaults to a private memory cache.
    """

    def __init__(
        self,
        providers: Sequence[Provider],
        zones: Iterable[str] = (),
        *,
        refresh_seconds: float | None = None,
        max_age_seconds: float | None = None,
        settings: FeedConfig | None = None,
        cache: IntensityCache | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        if not providers:
            raise ValueError("the feed needs at least one provider")
        settings = settings or FeedConfig()
        if refresh_seconds is not None:
            settings = dataclasses.replace(settings, refresh_seconds=refresh_seconds)
        if max_age_seconds is not None:
            settings = dataclasses.replace(settings, max_age_seconds=max_age_seconds)
        self.settings = settings
        self.providers = tuple(providers)
        self.cache = cache or IntensityCache.memory()
        self._zones: set[str] = set(zones)
        self._clock = clock
        self._max_age = timedelta(seconds=settings.max_age_seconds)
        # provider name -> zone -> last good answer
        self._latest: dict[str, dict[str, Reading]] = {p.name: {} for p in self.providers}
        self._forecasts: dict[str, dict[str, tuple[Reading, ...]]] = {
            p.name: {} for p in self.providers
        }
        # zone -> provider name -> last error message (cleared by an answer)
        self._problems: dict[str, dict[str, str]] = {}
        # cache key -> when this replica should look at the key again
        self._due: dict[str, datetime] = {}
        self._inflight: dict[str, asyncio.Task[Entry]] = {}
        self._answering: dict[str, str] = {}  # zone -> provider label on the INTENSITY gauge
        self._owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._changes = 0  # bumped whenever a held reading is replaced
        self._snapshot: tuple[int, Snapshot] | None = None

    @classmethod
    def from_config(
        cls,
        config: Config,
        zones: Iterable[str] | None = None,
        *,
        env: Mapping[str, str] | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> IntensityFeed:
        """The feed for a configuration: its provider chain, its zones in use, and the
        cache chosen by ``CARBONSHIFT_REDIS_URL``. Raises InvalidInput (bad provider
        options) or ValueError (bad Redis URL)."""
        from webhook.providers.registry import build_providers  # noqa: PLC0415 (cycle)

        providers = build_providers(config, env=env)
        return cls(
            providers,
            config.zones_in_use() if zones is None else zones,
            settings=config.feed,
            cache=IntensityCache.from_env(env),
            clock=clock,
        )

    # --- answers from memory ---------------------------------------------------------

    def _stale(self, reading: Reading, now: datetime) -> bool:
        return now - reading.valid_to > self._max_age

    def _answer(self, zone: str, now: datetime) -> tuple[str, Reading] | None:
        newest: tuple[str, Reading] | None = None
        for provider in self.providers:
            reading = self._latest[provider.name].get(zone)
            if reading is None:
                continue
            if not self._stale(reading, now):
                return provider.name, reading
            if newest is None or reading.valid_to > newest[1].valid_to:
                newest = (provider.name, reading)
        if newest is None:
            return None
        return newest[0], dataclasses.replace(newest[1], stale=True)

    def get(self, zone: str) -> Reading | None:
        """The reading for ``zone`` from the first provider with a non-stale one, else
        the newest reading flagged stale; None if no provider ever answered."""
        answer = self._answer(zone, self._clock())
        return answer[1] if answer is not None else None

    def table(self) -> IntensityTable:
        """Every zone's reading that :meth:`get` would answer."""
        return self.snapshot().table

    def snapshot(self) -> Snapshot:
        """The current :class:`Snapshot`; recomputed only after a change, so request
        handlers get it for the cost of a clock read."""
        now = self._clock()
        held = self._snapshot
        if held is not None and held[0] == self._changes and now <= held[1].until:
            return held[1]
        zones = {z for readings in self._latest.values() for z in readings}
        table = {z: a[1] for z in zones if (a := self._answer(z, now)) is not None}
        held_readings = (r for by_zone in self._latest.values() for r in by_zone.values())
        turns_stale = (r.valid_to + self._max_age for r in held_readings)
        until = min((t for t in turns_stale if t >= now), default=now + timedelta(hours=1))
        generation = held[1].generation + 1 if held is not None else 1
        snapshot = Snapshot(table, generation, until)
        self._snapshot = (self._changes, snapshot)
        return snapshot

    def mean_over(self, zone: str, horizon: timedelta) -> Reading | None:
        """Time-weighted mean intensity over ``[now, now + horizon)`` from forecasts.

        Uses only the provider that answers :meth:`get` for the zone (signals are never
        mixed), its forecast periods plus its latest reading for the current period.
        None when that provider has no forecast covering at least
        :data:`MIN_COVERAGE` of the horizon. The result is flagged estimated; its
        ``valid_from``/``valid_to`` are the part of the horizon actually covered and its
        ``source`` is ``<provider's source>+forecast``.
        """
        now = self._clock()
        answer = self._answer(zone, now)
        if answer is None or answer[1].stale or horizon <= timedelta(0):
            return None
        name, latest = answer
        periods = list(self._forecasts[name].get(zone, ()))
        if not periods:
            return None
        end = now + horizon
        if not any(p.valid_from <= now < p.valid_to for p in periods):
            periods.append(latest)
        weighted = covered = 0.0
        first, last = end, now
        for p in periods:
            start, stop = max(p.valid_from, now), min(p.valid_to, end)
            seconds = (stop - start).total_seconds()
            if seconds <= 0:
                continue
            weighted += p.value * seconds
            covered += seconds
            first, last = min(first, start), max(last, stop)
        if covered < MIN_COVERAGE * horizon.total_seconds():
            return None
        return Reading(
            zone=zone,
            value=weighted / covered,
            signal=latest.signal,
            valid_from=first,
            valid_to=last,
            estimated=True,
            source=f"{latest.source}+forecast",
        )

    def forecast(self, zone: str) -> tuple[Reading, ...]:
        """Forecast periods held for the provider that answers :meth:`get` (may be empty)."""
        answer = self._answer(zone, self._clock())
        return self._forecasts[answer[0]].get(zone, ()) if answer is not None else ()

    def status(self, zone: str) -> ZoneStatus:
        """The answer for ``zone``, who gave it and why earlier providers did not."""
        answer = self._answer(zone, self._clock())
        problems = dict(self._problems.get(zone, {}))
        if answer is not None:
            # Providers after the one that answered were not needed: not a problem.
            names = [p.name for p in self.providers]
            problems = {
                k: v for k, v in problems.items() if names.index(k) < names.index(answer[0])
            }
        return ZoneStatus(
            zone=zone,
            reading=answer[1] if answer else None,
            provider=answer[0] if answer else None,
            problems=problems,
        )

    def zones(self) -> frozenset[str]:
        """Zones the refresher keeps warm."""
        return frozenset(self._zones)

    def missing(self) -> list[str]:
        """Zones in use for which no provider has a reading (not even a stale one)."""
        now = self._clock()
        return sorted(z for z in self._zones if self._answer(z, now) is None)

    def stale(self) -> list[str]:
        """Zones in use whose reading is stale (every provider's answer is too old)."""
        now = self._clock()
        return sorted(
            z for z in self._zones if (a := self._answer(z, now)) is not None and a[1].stale
        )

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

    async def refresh_once(self, *, force: bool = False) -> None:
        """Bring every zone in use up to date (concurrently); ``force`` re-reads the
        cache even for answers that have not expired."""
        if force:
            self._due.clear()
        zones = sorted(self._zones)
        await asyncio.gather(*(self._refresh_zone(z) for z in zones))
        self._publish(zones)

    async def _refresh_zone(self, zone: str) -> None:
        for provider in self.providers:
            reading = await self._refresh(provider, LATEST, zone)
            if reading is not None and not self._stale(reading, self._clock()):
                if self.settings.forecasts:
                    await self._refresh(provider, FORECAST, zone)
                return

    async def _refresh(self, provider: Provider, kind: str, zone: str) -> Reading | None:
        """Update this provider's answer of ``kind`` for ``zone`` if due; return its
        latest reading (possibly old) or None."""
        key = entry_key(provider.name, kind, zone)
        due = self._due.get(key)
        if due is None or self._clock() >= due:
            entry = await self._lookup(provider, kind, zone)
            self._apply(entry)
            self._due[key] = entry.expires_at
        return self._latest[provider.name].get(zone)

    def _apply(self, entry: Entry) -> None:
        name, zone = entry.provider, entry.zone
        if entry.kind == LATEST and entry.readings:
            held = self._latest[name].get(zone)
            if held is None or entry.readings[0].valid_from >= held.valid_from:
                self._latest[name][zone] = entry.readings[0]
                self._changes += 1
        elif entry.kind == FORECAST and (entry.ok or zone not in self._forecasts[name]):
            self._forecasts[name][zone] = entry.readings
        problems = self._problems.setdefault(zone, {})
        if entry.ok and entry.kind == LATEST:
            problems.pop(name, None)
        elif not entry.ok and entry.kind == LATEST:
            problems[name] = entry.error or "unknown error"

    async def _lookup(self, provider: Provider, kind: str, zone: str) -> Entry:
        """The current answer for a key: cached, or fetched once (single flight)."""
        key = entry_key(provider.name, kind, zone)
        task = self._inflight.get(key)
        if task is None:
            task = asyncio.create_task(self._load(provider, kind, zone, key), name=f"fetch {key}")
            self._inflight[key] = task
            task.add_done_callback(lambda _t: self._inflight.pop(key, None))
        return await asyncio.shield(task)

    async def _load(self, provider: Provider, kind: str, zone: str, key: str) -> Entry:
        cached = await self.cache.get(key)
        if cached is not None and self._clock() < cached.expires_at:
            count_lookup("hit")
            return cached
        count_lookup("stale" if cached is not None else "miss")
        if not self.cache.shared:
            return await self._fetch_and_store(provider, kind, zone, key, cached)
        lease = _lease_seconds(provider)
        waited = 0.0
        while True:
            if await self.cache.acquire(key, self._owner, lease):
                try:
                    # Another replica may have stored an answer since our lookup.
                    newer = await self.cache.get(key)
                    if newer is not None and self._clock() < newer.expires_at:
                        return newer
                    return await self._fetch_and_store(provider, kind, zone, key, newer or cached)
                finally:
                    await self.cache.release(key, self._owner)
            await asyncio.sleep(LEASE_POLL_SECONDS)
            waited += LEASE_POLL_SECONDS
            newer = await self.cache.get(key)
            if newer is not None and self._clock() < newer.expires_at:
                return newer
            if waited > 2 * lease:  # the holder neither answered nor let go: fetch anyway
                return await self._fetch_and_store(provider, kind, zone, key, newer or cached)

    async def _fetch_and_store(
        self, provider: Provider, kind: str, zone: str, key: str, previous: Entry | None
    ) -> Entry:
        entry = await self._fetch(provider, kind, zone, previous)
        remaining = (entry.expires_at - self._clock()).total_seconds()
        await self.cache.put(key, entry, remaining + self.settings.max_age_seconds)
        return entry

    async def _fetch(
        self, provider: Provider, kind: str, zone: str, previous: Entry | None
    ) -> Entry:
        """Ask the provider; errors become entries that keep the last good readings."""
        now = self._clock()
        try:
            if kind == LATEST:
                readings: tuple[Reading, ...] = (await provider.latest(zone),)
            else:
                readings = tuple(await provider.forecast(zone))
        except ProviderError as exc:
            error: ProviderError = exc
        except Exception as exc:  # a provider bug must not stop the refresher
            log.exception("provider_failed", provider=provider.name, zone=zone, kind=kind)
            error = ProviderError(provider.name, f"internal error ({type(exc).__name__})")
        else:
            return Entry(
                provider=provider.name,
                kind=kind,
                zone=zone,
                readings=readings,
                fetched_at=now,
                expires_at=self._expiry(readings, now),
            )
        PROVIDER_ERRORS.labels(provider.name, type(error).__name__).inc()
        level = log.info if isinstance(error, ZoneNotSupported) else log.warning
        level(
            "provider_failed",
            provider=provider.name,
            zone=zone,
            kind=kind,
            error=type(error).__name__,
            reason=str(error),
        )
        return Entry(
            provider=provider.name,
            kind=kind,
            zone=zone,
            readings=previous.readings if previous is not None else (),
            fetched_at=now,
            expires_at=now + timedelta(seconds=self.settings.error_backoff_seconds),
            error=str(error),
            error_type=type(error).__name__,
        )

    def _expiry(self, readings: Sequence[Reading], now: datetime) -> datetime:
        low = now + timedelta(seconds=self.settings.min_ttl_seconds)
        high = now + timedelta(seconds=self.settings.max_ttl_seconds)
        if not readings:  # e.g. a provider without forecasts: ask again now and then
            return min(high, now + timedelta(seconds=self.settings.refresh_seconds))
        return min(max(readings[0].valid_to, low), high)

    def _publish(self, zones: Iterable[str]) -> None:
        """Export the answers as metrics."""
        now = self._clock()
        for zone in zones:
            answer = self._answer(zone, now)
            if answer is None:
                continue
            name, reading = answer
            previous = self._answering.get(zone)
            if previous is not None and previous != name:
                with contextlib.suppress(KeyError):
                    INTENSITY.remove(zone, previous)
                log.warning("provider_fallback", zone=zone, provider=name, previous=previous)
            self._answering[zone] = name
            INTENSITY.labels(zone, name).set(reading.value)
            DATA_AGE.labels(zone).set(reading.age_seconds(now))
            INTENSITY_STALE.labels(zone).set(1 if reading.stale else 0)

    def next_wake(self) -> float:
        """Seconds until an answer expires or a reading turns stale (at most
        ``refresh_seconds``, at least one second)."""
        now = self._clock()
        times = list(self._due.values())
        for readings in self._latest.values():
            times.extend(r.valid_to + self._max_age for r in readings.values())
        soonest = min((t for t in times if t > now), default=None)
        delay = self.settings.refresh_seconds
        if soonest is not None:
            delay = min(delay, (soonest - now).total_seconds())
        return max(1.0, math.ceil(delay * 10) / 10)

    async def start(self, *, wait: bool = True) -> None:
        """Start refreshing in the background; ``wait`` loads every zone once first."""
        if wait:
            await self.refresh_once()
        self._task = asyncio.create_task(self._run(first=not wait), name="intensity-refresh")

    async def _run(self, *, first: bool) -> None:
        while True:
            if not first:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.next_wake())
            first = False
            self._wake.clear()
            try:
                await self.refresh_once()
            except Exception:  # the refresher must outlive any provider bug
                log.exception("refresh_failed")

    async def stop(self) -> None:
        """Stop refreshing, cancel fetches in flight, close the providers and the cache."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        for task in list(self._inflight.values()):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for provider in self.providers:
            await provider.close()
        await self.cache.close()


def _lease_seconds(provider: Provider) -> float:
    """How long one fetch may take, with a second to spare."""
    return provider.worst_case_seconds + 1.0
