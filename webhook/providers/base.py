"""The provider interface and its errors.

Error tree::

    ProviderError                 the provider could not answer (retry later, try the next one)
    +-- ZoneNotSupported          this provider never answers for that zone (go to the next one)
    +-- AuthenticationFailed      401/403: the credentials are wrong (not an outage)
    +-- RateLimited               429: wait ``retry_after`` seconds
    +-- IncomparableSignal        the value is relative (a percentile) and cannot be ranked
    +-- CircuitOpen               the provider failed repeatedly; calls are skipped for a while
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from webhook.model.intensity import Reading


@runtime_checkable
class Provider(Protocol):
    """A source of carbon-intensity readings.

    Implementations are async and may do network I/O; they are only ever called from
    the feed's background tasks, never from a request handler.
    """

    @property
    def name(self) -> str:
        """Short name used in config (``providers: [...]``), decisions, logs and metrics."""
        ...

    @property
    def worst_case_seconds(self) -> float:
        """Longest one :meth:`latest` or :meth:`forecast` call may take, retries and
        backoff included; the feed holds a shared-cache lease this long while it fetches.
        Providers without network I/O answer a small constant."""
        ...

    async def latest(self, zone: str) -> Reading:
        """The most recent reading for ``zone``; raises :class:`ProviderError`."""
        ...

    async def forecast(self, zone: str) -> Sequence[Reading]:
        """Readings for coming periods, in time order; empty if the provider has none."""
        ...

    async def history(self, zone: str) -> Sequence[Reading]:
        """Readings of the past day, in time order; empty if the provider keeps none. The
        feed seeds its hourly history with them (:mod:`webhook.feed.history`), so the
        day-ahead profile forecasts right after a start instead of a day later."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...
