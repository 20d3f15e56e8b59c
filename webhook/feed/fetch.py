"""One question to one provider, turned into a cache :class:`Entry`.

A good answer is reused until its period ends, clamped to
``feed.min_ttl_seconds .. feed.max_ttl_seconds``; an answer without readings (a
provider with no forecast) until the next regular refresh. A failure becomes an entry
that keeps the last good readings (stale-while-revalidate) and is retried after
``feed.error_backoff_seconds``; it is counted, and logged at a level that says whether
it matters (a zone the provider does not cover, or a past day it does not give, is only
info). The same failure (provider, zone, kind, error) is logged once per
:data:`~webhook.runtime.logs.REPEAT_SECONDS`, the next line saying how many were held back
(``repeated``), not once per retry.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

import structlog

from webhook.feed.cache import Entry
from webhook.feed.memory import HISTORY, LATEST
from webhook.model.config import FeedConfig
from webhook.model.errors import ProviderError, ZoneNotSupported
from webhook.model.intensity import Reading
from webhook.providers.base import Provider
from webhook.runtime.logs import Repeats
from webhook.runtime.metrics import PROVIDER_ERRORS

log = structlog.get_logger("carbonshift.feed")


async def fetch(
    provider: Provider,
    kind: str,
    zone: str,
    previous: Entry | None,
    *,
    settings: FeedConfig,
    now: datetime,
    repeats: Repeats | None = None,
) -> Entry:
    """Ask ``provider`` for its ``kind`` answer for ``zone``; errors become entries that
    keep ``previous``'s readings. ``repeats`` holds back a failure logged already."""
    try:
        if kind == LATEST:
            readings: tuple[Reading, ...] = (await provider.latest(zone),)
        elif kind == HISTORY:
            readings = tuple(await provider.history(zone))
        else:
            readings = tuple(await provider.forecast(zone))
    except ProviderError as exc:
        error: ProviderError = exc
    except Exception as exc:  # a provider bug must not stop the refresher
        if _let(repeats, (provider.name, zone, kind, "bug"), now) is not None:
            log.exception("provider_failed", provider=provider.name, zone=zone, kind=kind)
        error = ProviderError(provider.name, f"internal error ({type(exc).__name__})")
    else:
        return Entry(
            provider=provider.name,
            kind=kind,
            zone=zone,
            readings=readings,
            fetched_at=now,
            expires_at=expiry(readings, now, settings),
        )
    PROVIDER_ERRORS.labels(provider.name, type(error).__name__).inc()
    # A zone the provider does not cover, or past readings it does not give (they only
    # seed the history), do not need anyone's attention.
    quiet = isinstance(error, ZoneNotSupported) or kind == HISTORY
    level = log.info if quiet else log.warning
    held = _let(repeats, (provider.name, zone, kind, type(error).__name__), now)
    if held is not None:
        level(
            "provider_failed",
            provider=provider.name,
            zone=zone,
            kind=kind,
            error=type(error).__name__,
            reason=str(error),
            **({"repeated": held} if held else {}),
        )
    return Entry(
        provider=provider.name,
        kind=kind,
        zone=zone,
        readings=previous.readings if previous is not None else (),
        fetched_at=now,
        expires_at=now + timedelta(seconds=settings.error_backoff_seconds),
        error=str(error),
        error_type=type(error).__name__,
    )


def _let(repeats: Repeats | None, key: tuple[str, ...], now: datetime) -> int | None:
    return 0 if repeats is None else repeats.let(key, now.timestamp())


def expiry(readings: Sequence[Reading], now: datetime, settings: FeedConfig) -> datetime:
    """When a good answer should be fetched again (see the module docstring)."""
    low = now + timedelta(seconds=settings.min_ttl_seconds)
    high = now + timedelta(seconds=settings.max_ttl_seconds)
    if not readings:  # e.g. a provider without forecasts: ask again now and then
        return min(high, now + timedelta(seconds=settings.refresh_seconds))
    return min(max(readings[0].valid_to, low), high)
