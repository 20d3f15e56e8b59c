"""The :class:`IntensityFeed`: one object joining memory, refresher, forecasts and metrics."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta

import msgspec
import structlog

from webhook.decision.forecast import Method
from webhook.decision.forecast_quality import Spread
from webhook.feed import forecasts, history
from webhook.feed.cache import IntensityCache
from webhook.feed.judging import BEST, WINDOW_HOURS, Judge, Judgement
from webhook.feed.memory import Memory, Snapshot, ZoneStatus
from webhook.feed.publish import Publisher
from webhook.feed.refresh import Refresher
from webhook.feed.zones import check_config, requestable
from webhook.model.config import Config, FeedConfig
from webhook.model.intensity import IntensityTable, Reading, utcnow
from webhook.providers.base import Provider
from webhook.providers.registry import build_providers
from webhook.runtime import tasks
from webhook.runtime.metrics import REQUESTED_ZONES, REQUESTED_ZONES_REFUSED

log = structlog.get_logger("carbonshift.feed")


NOT_SERVED = "not_served"
OVER_LIMIT = "over_limit"
"""Why a requested zone is not kept warm (``carbonshift_requested_zones_refused_total``)."""
REFUSED = {reason: REQUESTED_ZONES_REFUSED.labels(reason) for reason in (NOT_SERVED, OVER_LIMIT)}
MAX_ZONE = 64
"""Longest grid zone key (:data:`webhook.model.validation.GRID_ZONE_PATTERN`)."""


class IntensityFeed:
    """Latest reading and forecast per zone, refreshed in the background (package doc).

    ``providers`` is the chain, in order. ``settings`` holds the ``feed`` config
    section; ``refresh_seconds``/``max_age_seconds`` override it when given. ``cache``
    defaults to a private memory cache.

    The zones kept warm are of two sorts. **Kept** zones: ``zones`` (the configuration's)
    and every zone :meth:`want` names (the fleet's: Karmada Clusters, the Nodes' zone, the
    leader's controllers), always refreshed with the whole chain. **Requested** zones:
    the ones only a scheduler request named (:meth:`ask`), kept only when a provider of
    the chain serves them (:func:`webhook.feed.zones.requestable`), refreshed with those
    providers alone, and at most ``feed.max_requested_zones`` of them: once that many are
    held, the least recently asked one is dropped for a new one (with its readings, its
    history and its metric series) if it was not asked for ``feed.refresh_seconds``, else
    the new one is refused. Whatever callers send, the feed holds, fetches, exports and
    logs for the configuration's and the fleet's zones and at most that many more.
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
            settings = msgspec.structs.replace(settings, refresh_seconds=refresh_seconds)
        if max_age_seconds is not None:
            settings = msgspec.structs.replace(settings, max_age_seconds=max_age_seconds)
        self.settings = settings
        self.providers = tuple(providers)
        self.cache = cache or IntensityCache.memory()
        self._kept: set[str] = set(zones)
        self._asked: dict[str, datetime] = {}
        """Requested zones -> when last asked for, least recently asked first."""
        self._serves = requestable(self.providers)
        self._served = frozenset().union(*(z for z in self._serves.values() if z is not None))
        self._open = any(z is None for z in self._serves.values())
        self._clock = clock
        max_age = timedelta(seconds=settings.max_age_seconds)
        self._memory = Memory([p.name for p in self.providers], max_age)
        self._refresher = Refresher(self.providers, self._memory, self.cache, settings, clock)
        self._judge = Judge(self._memory, seasonal=settings.seasonal)
        self._publisher = Publisher()
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._loaded = False  # a first refresh pass ended (see ready)

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
        options, or, when ``zones`` is None, a zone of the configuration that no provider
        of the chain can ever serve: :func:`webhook.feed.zones.check_config`) or
        ValueError (bad Redis URL)."""
        providers = build_providers(config, env=env)
        if zones is None:
            check_config(config, providers)
        return cls(
            providers,
            config.zones_in_use() if zones is None else zones,
            settings=config.feed,
            cache=IntensityCache.from_env(env),
            clock=clock,
        )

    # --- answers from memory (never wait for I/O) ---------------------------------------

    def get(self, zone: str) -> Reading | None:
        """The reading for ``zone`` from the first provider with a non-stale one, else
        the newest reading flagged stale; None if no provider ever answered."""
        answer = self._memory.answer(zone, self._clock())
        return answer[1] if answer is not None else None

    def table(self) -> IntensityTable:
        """Every zone's reading that :meth:`get` would answer."""
        return self.snapshot().table

    def snapshot(self) -> Snapshot:
        """The current :class:`Snapshot`; recomputed only after a change, so request
        handlers get it for the cost of a clock read."""
        return self._memory.snapshot(self._clock())

    def mean_over(self, zone: str, horizon: timedelta) -> Reading | None:
        """Time-weighted mean intensity over ``[now, now + horizon)`` from the forecast
        of the provider that answers :meth:`get` for the zone (signals are never mixed);
        see :func:`webhook.feed.forecasts.mean_over`. None when the answer is stale or
        the forecast covers too little of the horizon."""
        now = self._clock()
        answer = self._memory.answer(zone, now)
        if answer is None or answer[1].stale:
            return None
        name, latest = answer
        periods = self._memory.forecasts[name].get(zone, ())
        return forecasts.mean_over(periods, latest, now, horizon)

    def outlook(
        self, zone: str, horizon_hours: int, method: history.OutlookMethod
    ) -> list[float] | None:
        """``[now, now+1 h, .., now+horizon_hours]`` for ``zone`` from the provider that
        answers :meth:`get`: a :class:`~webhook.decision.forecast.Method` over the hourly
        readings observed (:mod:`webhook.feed.history`), ``"provider"``: the provider's
        own forecast periods, or ``"best"``: whichever of those and the seasonal forecaster
        ranked the hours of windows of ``horizon_hours`` best on what the feed kept
        (:meth:`quality`; the profile when the provider's forecast does not cover the
        horizon now). None when
        the answer is stale, there is not enough history or forecast, or ``method`` is
        None. Answers from memory."""
        now = self._clock()
        answer = self._memory.answer(zone, now)
        if method is None or answer is None or answer[1].stale:
            return None
        name, latest = answer
        if method == BEST:
            chosen = self._judge.judgement(name, zone, max(1, horizon_hours)).chosen
            method = Method.PROFILE if chosen == history.PROVIDER else Method(chosen)
            if chosen == history.PROVIDER:
                periods = self._memory.forecasts[name].get(zone, ())
                given = history.provider_outlook(periods, latest, now, horizon_hours)
                if given is not None and len(given) == horizon_hours + 1:
                    return given
        if isinstance(method, Method):
            return self._memory.history.outlook(name, zone, horizon_hours, method)
        periods = self._memory.forecasts[name].get(zone, ())
        return history.provider_outlook(periods, latest, now, horizon_hours)

    def spread(self, zone: str, horizon_hours: int, method: history.OutlookMethod) -> Spread | None:
        """The past errors, hour by hour ahead, of the forecaster :meth:`outlook` answers
        ``zone`` with for ``method`` (``best``: the one the judge chose), over the windows
        of ``horizon_hours`` the feed judged; None without any (a forecaster the judge
        does not judge, too little history, a stale answer). Answers from memory."""
        answer = self._memory.answer(zone, self._clock())
        if method is None or answer is None or answer[1].stale:
            return None
        name, window = answer[0], max(1, horizon_hours)
        if method == BEST:
            forecaster = self._judge.judgement(name, zone, window).chosen
        else:
            forecaster = method.value if isinstance(method, Method) else history.PROVIDER
        return self._judge.spread(name, zone, window, forecaster)

    def quality(self, zone: str, window_hours: int = WINDOW_HOURS) -> Judgement | None:
        """How the provider answering ``zone`` and the day-ahead profile ranked the hours
        of windows of ``window_hours`` ahead over the days kept, each with the number of
        windows it rests on, and which one ``"best"`` uses
        (:mod:`webhook.feed.judging`). None when no provider answers the zone."""
        answer = self._memory.answer(zone, self._clock())
        if answer is None:
            return None
        return self._judge.judgement(answer[0], zone, window_hours)

    def forecast(self, zone: str) -> tuple[Reading, ...]:
        """Forecast periods held for the provider that answers :meth:`get` (may be empty)."""
        return self._memory.forecast(zone, self._clock())

    def status(self, zone: str) -> ZoneStatus:
        """The answer for ``zone``, who gave it and why earlier providers did not."""
        return self._memory.status(zone, self._clock())

    def zones(self) -> frozenset[str]:
        """Zones the refresher keeps warm (kept and requested)."""
        return frozenset(self._kept.union(self._asked))

    def requested(self) -> list[str]:
        """The requested zones kept warm (:meth:`ask`), least recently asked first."""
        return list(self._asked)

    def missing(self) -> list[str]:
        """Zones in use for which no provider has a reading (not even a stale one). They
        rank last; each is logged once when it goes missing (a warning) and when it is
        back, and ``carbonshift_zone_data_missing{zone}`` is 1 meanwhile."""
        now = self._clock()
        return sorted(z for z in self.zones() if self._memory.answer(z, now) is None)

    def stale(self) -> list[str]:
        """Zones in use whose reading is stale (every provider's answer is too old)."""
        now = self._clock()
        return sorted(
            z for z in self.zones() if (a := self._memory.answer(z, now)) is not None and a[1].stale
        )

    @property
    def ready(self) -> bool:
        """True once every zone in use at start has been asked for once (the first
        refresh pass ended), whatever the providers answered: a zone without data ranks
        last and never keeps the process from answering (:meth:`missing` names them)."""
        return self._loaded or not self._kept

    def want(self, zone: str) -> None:
        """Keep ``zone`` warm for good (a zone the fleet names); the refresher fetches it
        soon, never the caller."""
        if zone not in self._kept:
            self._kept.add(zone)
            self._asked.pop(zone, None)
            REQUESTED_ZONES.set(len(self._asked))
            self._wake.set()

    def ask(self, zone: str) -> str | None:
        """A scheduler request names ``zone``: keep it warm if the feed may (class doc),
        the refresher fetching it soon, never the caller. None when it is kept; else why
        not, for the request's answer (the zone is then neither fetched nor remembered)."""
        if zone in self._kept:
            return None
        asked = self._asked
        now = self._clock()
        if zone in asked:
            del asked[zone]  # to the end: the most recently asked
            asked[zone] = now
            return None
        if len(zone) > MAX_ZONE or not (self._open or zone in self._served):
            REFUSED[NOT_SERVED].inc()
            return "zone not served by any provider"
        limit = self.settings.max_requested_zones
        if len(asked) >= limit:
            oldest, at = next(iter(asked.items()), (None, now))
            idle = timedelta(seconds=self.settings.refresh_seconds)
            if oldest is None or now - at < idle:
                REFUSED[OVER_LIMIT].inc()
                return f"over the limit of {limit} requested zones"
            del asked[oldest]
            self._forget(oldest)
        asked[zone] = now
        REQUESTED_ZONES.set(len(asked))
        self._wake.set()
        return None

    def _forget(self, zone: str) -> None:
        """Drop what is held for a zone no longer kept warm: readings, history, when to
        look again, metric series."""
        self._memory.forget(zone)
        self._refresher.forget(zone)
        self._publisher.forget(zone)

    def _chain(self, zone: str) -> Sequence[Provider] | None:
        """The providers to ask for ``zone``: the whole chain for a kept zone, the ones
        that serve it for a requested one."""
        if zone in self._kept:
            return None
        return [p for p in self.providers if (z := self._serves[p.name]) is None or zone in z]

    # --- background -------------------------------------------------------------------

    async def refresh_once(self, *, force: bool = False) -> None:
        """Bring every zone in use up to date (concurrently); ``force`` re-reads the
        cache even for answers that have not expired."""
        if force:
            self._refresher.forget_due()
        zones = sorted(self.zones())
        try:
            await asyncio.gather(*(self._refresher.refresh_zone(z, self._chain(z)) for z in zones))
        finally:
            self._loaded = True
        zones = sorted(self.zones())  # a requested zone may have been dropped meanwhile
        for gone in self._memory.zones().difference(zones):  # a fetch ended after its drop
            self._forget(gone)
        self._publisher.publish(self._memory, zones, self._clock())
        self._publisher.choices({z: self.quality(z) for z in zones})

    def next_wake(self) -> float:
        """Seconds until an answer expires or a reading turns stale (at most
        ``refresh_seconds``, at least one second)."""
        return self._refresher.next_wake()

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
        await tasks.cancel(self._task)
        self._task = None
        await self._refresher.cancel()
        for provider in self.providers:
            await provider.close()
        await self.cache.close()
