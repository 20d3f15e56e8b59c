"""Refreshing: keep every provider's answer for every zone in use up to date.

For each zone the providers are asked in chain order:

1. A provider whose answer has not expired yet is not asked again (no cache lookup
   either); this replica's next look at a key is in :attr:`Refresher.due`.
2. An expired answer is looked up in the cache; a fresh cache entry (fetched by this
   replica earlier or by another replica) is used as is.
3. Otherwise one fetch is made (:mod:`webhook.feed.fetch`): concurrent refreshes of one
   key share it (single flight) and, with Redis, one replica holds a lease for the key
   while the others wait for its answer, so the fleet calls a provider once per zone
   per validity window. The lease lasts the provider's
   :attr:`~webhook.providers.base.Provider.worst_case_seconds` plus a second.
4. A provider that answers with a fresh reading ends the walk down the chain; its
   forecast is refreshed the same way, and, while the feed holds less than a day of its
   hourly history for the zone (after a start), its past day's readings
   (:meth:`~webhook.providers.base.Provider.history`), which seed the history.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import socket
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TypeGuard

from webhook.feed.cache import Entry, IntensityCache, count_lookup, entry_key
from webhook.feed.fetch import fetch
from webhook.feed.memory import FORECAST, HISTORY, LATEST, Memory
from webhook.model.config import FeedConfig
from webhook.model.intensity import Reading
from webhook.providers.base import Provider
from webhook.runtime.logs import Repeats

LEASE_POLL_SECONDS = 0.05
"""How often a replica waiting for another one's fetch looks at the cache."""


class Refresher:
    """Brings ``memory`` up to date from ``providers`` through ``cache``."""

    def __init__(
        self,
        providers: Sequence[Provider],
        memory: Memory,
        cache: IntensityCache,
        settings: FeedConfig,
        clock: Callable[[], datetime],
    ) -> None:
        self.providers = tuple(providers)
        self.memory = memory
        self.cache = cache
        self.settings = settings
        self._clock = clock
        self.due: dict[str, datetime] = {}
        """Cache key -> when this replica should look at the key again."""
        self._inflight: dict[str, asyncio.Task[Entry]] = {}
        self.repeats = Repeats()
        """Failures logged already (:func:`webhook.feed.fetch.fetch`)."""
        self._owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

    async def refresh_zone(self, zone: str, providers: Sequence[Provider] | None = None) -> None:
        """Walk the chain (or ``providers``, a part of it) for ``zone`` until a provider
        has a fresh reading."""
        for provider in self.providers if providers is None else providers:
            reading = await self._refresh(provider, LATEST, zone)
            if reading is not None and not self.memory.is_stale(reading, self._clock()):
                if self.settings.forecasts:
                    await self._refresh(provider, FORECAST, zone)
                if self.memory.history.short(provider.name, zone):
                    await self._refresh(provider, HISTORY, zone)
                return

    async def _refresh(self, provider: Provider, kind: str, zone: str) -> Reading | None:
        """Update this provider's answer of ``kind`` for ``zone`` if due; return its
        latest reading (possibly old) or None."""
        key = entry_key(provider.name, kind, zone)
        due = self.due.get(key)
        if due is None or self._clock() >= due:
            entry = await self._lookup(provider, kind, zone)
            self.memory.apply(entry)
            self.due[key] = entry.expires_at
        return self.memory.latest[provider.name].get(zone)

    async def _lookup(self, provider: Provider, kind: str, zone: str) -> Entry:
        """The current answer for a key: cached, or fetched once (single flight)."""
        key = entry_key(provider.name, kind, zone)
        task = self._inflight.get(key)
        if task is None:
            task = asyncio.create_task(self._load(provider, kind, zone, key), name=f"fetch {key}")
            self._inflight[key] = task
            task.add_done_callback(lambda _t: self._inflight.pop(key, None))
        return await asyncio.shield(task)

    def _fresh(self, entry: Entry | None) -> TypeGuard[Entry]:
        return entry is not None and self._clock() < entry.expires_at

    async def _load(self, provider: Provider, kind: str, zone: str, key: str) -> Entry:
        cached = await self.cache.get(key)
        if self._fresh(cached):
            count_lookup("hit")
            return cached
        count_lookup("stale" if cached is not None else "miss")
        if not self.cache.shared:
            return await self._fetch_and_store(provider, kind, zone, key, cached)
        lease = provider.worst_case_seconds + 1.0
        waited = 0.0
        while True:
            if await self.cache.acquire(key, self._owner, lease):
                try:
                    # Another replica may have stored an answer since our lookup.
                    newer = await self.cache.get(key)
                    if self._fresh(newer):
                        return newer
                    return await self._fetch_and_store(provider, kind, zone, key, newer or cached)
                finally:
                    await self.cache.release(key, self._owner)
            await asyncio.sleep(LEASE_POLL_SECONDS)
            waited += LEASE_POLL_SECONDS
            newer = await self.cache.get(key)
            if self._fresh(newer):
                return newer
            if waited > 2 * lease:  # the holder neither answered nor let go: fetch anyway
                return await self._fetch_and_store(provider, kind, zone, key, newer or cached)

    async def _fetch_and_store(
        self, provider: Provider, kind: str, zone: str, key: str, previous: Entry | None
    ) -> Entry:
        entry = await fetch(
            provider,
            kind,
            zone,
            previous,
            settings=self.settings,
            now=self._clock(),
            repeats=self.repeats,
        )
        remaining = (entry.expires_at - self._clock()).total_seconds()
        await self.cache.put(key, entry, remaining + self.settings.max_age_seconds)
        return entry

    def next_wake(self) -> float:
        """Seconds until an answer expires or a reading turns stale (at most
        ``refresh_seconds``, at least one second)."""
        now = self._clock()
        times = [*self.due.values(), *self.memory.turns_stale()]
        soonest = min((t for t in times if t > now), default=None)
        delay = self.settings.refresh_seconds
        if soonest is not None:
            delay = min(delay, (soonest - now).total_seconds())
        return max(1.0, math.ceil(delay * 10) / 10)

    def forget(self, zone: str) -> None:
        """Stop looking at ``zone``'s keys (a zone no longer kept warm); a fetch in flight
        for it ends on its own."""
        for provider in self.providers:
            for kind in (LATEST, FORECAST, HISTORY):
                self.due.pop(entry_key(provider.name, kind, zone), None)

    def forget_due(self) -> None:
        """Look at every key again on the next refresh (``refresh_once(force=True)``)."""
        self.due.clear()

    async def cancel(self) -> None:
        """Cancel the fetches in flight."""
        for task in list(self._inflight.values()):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
