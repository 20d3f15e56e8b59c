"""The intensity cache: provider answers shared between refreshes and replicas.

Backed by aiocache 0.12.3: a process-local ``SimpleMemoryCache`` by default, or Redis
when ``CARBONSHIFT_REDIS_URL`` is set, so every replica sees the answer one of them
fetched. Nothing here is on the request path: request handlers read the feed's
in-memory snapshot (:mod:`webhook.feed`); only the background refresher uses the cache.

Each entry (:class:`Entry`) holds one provider's answer for one zone and kind
(``latest`` or ``forecast``): the readings, or an error together with the last good
readings. ``expires_at`` is when the answer should be fetched again (from the readings'
validity, or a short backoff for errors); the backend keeps the entry longer so that a
replica starting during an outage still finds the last good readings.

Values are stored as JSON bytes for both backends (no live objects in the memory
cache, so nothing can mutate a cached answer), every operation on the memory backend
runs with ``timeout=None`` (aiocache otherwise wraps each call in ``asyncio.wait_for``)
and Redis operations are bounded by :data:`REDIS_TIMEOUT_SECONDS`. Cache failures are
logged (once per operation and error per ten minutes, with the count held back) and treated
as misses: a broken Redis degrades to per-replica fetching.

Leases (:meth:`IntensityCache.acquire`) let exactly one replica fetch a key while the
others wait for its answer; a lease expires on its own if its holder dies.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any
from urllib.parse import unquote, urlsplit

import orjson
import structlog
from aiocache import RedisCache, SimpleMemoryCache
from aiocache.serializers import BaseSerializer

from webhook.model import errors
from webhook.model.intensity import Reading, Signal
from webhook.model.vocabulary import parse_time
from webhook.runtime.logs import Repeats
from webhook.runtime.metrics import CACHE_LOOKUPS

log = structlog.get_logger("carbonshift.cache")

REDIS_URL_ENV = "CARBONSHIFT_REDIS_URL"
REDIS_TIMEOUT_SECONDS = 2.0
NAMESPACE = "carbonshift:v1"
"""Prefix of every key; bump the version when :class:`Entry`'s encoding changes."""

_ERRORS: Mapping[str, type[errors.ProviderError]] = {
    cls.__name__: cls
    for cls in (
        errors.ProviderError,
        errors.ZoneNotSupported,
        errors.AuthenticationFailed,
        errors.RateLimited,
        errors.IncomparableSignal,
        errors.CircuitOpen,
    )
}


@dataclasses.dataclass(frozen=True, slots=True)
class Entry:
    """One provider's answer for one (kind, zone), as cached.

    ``readings`` is the answer (one reading for ``latest``, the forecast periods for
    ``forecast``); on failure ``error``/``error_type`` describe it and ``readings``
    keeps the last good answer, if any, for stale-while-revalidate.
    """

    provider: str
    kind: str
    zone: str
    readings: tuple[Reading, ...]
    fetched_at: datetime
    expires_at: datetime
    error: str | None = None
    error_type: str | None = None

    @property
    def ok(self) -> bool:
        """True when the provider answered."""
        return self.error is None

    def exception(self) -> errors.ProviderError:
        """The cached error as an exception of its original class."""
        cls = _ERRORS.get(self.error_type or "", errors.ProviderError)
        message = (self.error or "unknown error").removeprefix(f"{self.provider}: ")
        return cls(self.provider, message)

    def to_bytes(self) -> bytes:
        """JSON encoding (orjson handles the dataclasses and datetimes)."""
        return orjson.dumps(self)

    @classmethod
    def from_bytes(cls, raw: bytes) -> Entry:
        """Inverse of :meth:`to_bytes`; raises ValueError on anything else. orjson writes
        aware times as RFC 3339 (``2026-11-23T11:00:00.000005+00:00``), which the one
        time parser reads back as the same instant in UTC."""
        try:
            data = orjson.loads(raw)
            readings = tuple(
                Reading(
                    zone=r["zone"],
                    value=float(r["value"]),
                    signal=Signal(r["signal"]),
                    valid_from=parse_time(r["valid_from"]),
                    valid_to=parse_time(r["valid_to"]),
                    estimated=bool(r["estimated"]),
                    source=r["source"],
                    stale=bool(r.get("stale", False)),
                )
                for r in data["readings"]
            )
            return cls(
                provider=data["provider"],
                kind=data["kind"],
                zone=data["zone"],
                readings=readings,
                fetched_at=parse_time(data["fetched_at"]),
                expires_at=parse_time(data["expires_at"]),
                error=data.get("error"),
                error_type=data.get("error_type"),
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a cache entry: {type(exc).__name__}") from None


class _BytesSerializer(BaseSerializer):  # type: ignore[misc]
    """Stores the bytes it is given (entries encode themselves)."""

    DEFAULT_ENCODING = None

    def dumps(self, value: bytes) -> bytes:
        return value

    def loads(self, value: bytes | None) -> bytes | None:
        return value


def entry_key(provider: str, kind: str, zone: str) -> str:
    """Cache key of one answer (below :data:`NAMESPACE`)."""
    return f"{provider}:{kind}:{zone}"


class IntensityCache:
    """Provider answers by key, in memory or in Redis (see the module docstring)."""

    def __init__(self, backend: Any, *, shared: bool, description: str) -> None:
        self._backend = backend
        self.shared = shared
        """True when other replicas see the same entries (Redis)."""
        self.description = description
        """Where the entries live, for logs (never contains a password)."""
        self._repeats = Repeats()

    def __repr__(self) -> str:
        return f"IntensityCache({self.description})"

    @classmethod
    def memory(cls) -> IntensityCache:
        """A cache private to this process."""
        backend = SimpleMemoryCache(
            serializer=_BytesSerializer(), namespace=NAMESPACE, timeout=None
        )
        return cls(backend, shared=False, description="memory")

    @classmethod
    def redis(cls, url: str) -> IntensityCache:
        """A cache in Redis, shared by every replica using the same URL.

        ``redis://[[user]:password@]host[:port][/db]``; ``rediss://`` for TLS.
        """
        parts = urlsplit(url)
        if parts.scheme not in ("redis", "rediss") or not parts.hostname:
            raise ValueError(f"{REDIS_URL_ENV} must look like redis://[:password@]host[:port][/db]")
        db = parts.path.strip("/") or "0"
        if not db.isdigit():
            raise ValueError(f"{REDIS_URL_ENV}: the database must be a number")
        pool_kwargs = {"username": unquote(parts.username)} if parts.username else {}
        backend = RedisCache(
            serializer=_BytesSerializer(),
            namespace=NAMESPACE,
            timeout=REDIS_TIMEOUT_SECONDS,
            endpoint=parts.hostname,
            port=parts.port or 6379,
            db=int(db),
            password=unquote(parts.password) if parts.password else None,
            ssl=parts.scheme == "rediss",
            create_connection_timeout=REDIS_TIMEOUT_SECONDS,
            connection_pool_kwargs=pool_kwargs,
        )
        where = f"{parts.scheme}://{parts.hostname}:{parts.port or 6379}/{db}"
        return cls(backend, shared=True, description=where)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> IntensityCache:
        """Redis when ``CARBONSHIFT_REDIS_URL`` is set, else memory."""
        url = (os.environ if env is None else env).get(REDIS_URL_ENV, "").strip()
        return cls.redis(url) if url else cls.memory()

    async def get(self, key: str) -> Entry | None:
        """The entry under ``key`` (expired or not), None when absent or unreadable."""
        try:
            raw = await self._backend.get(key)
        except Exception as exc:  # a broken cache is a miss, never a failed refresh
            self._unavailable("get", exc)
            return None
        if raw is None:
            return None
        try:
            return Entry.from_bytes(raw)
        except ValueError:
            log.warning("cache_entry_unreadable", cache=self.description, key=key)
            return None

    async def put(self, key: str, entry: Entry, ttl_seconds: float) -> None:
        """Store ``entry``; the backend drops it after ``ttl_seconds``."""
        try:
            await self._backend.set(key, entry.to_bytes(), ttl=max(1, round(ttl_seconds)))
        except Exception as exc:
            self._unavailable("set", exc)

    async def acquire(self, key: str, owner: str, ttl_seconds: float) -> bool:
        """Take the fetch lease for ``key``; False if another replica holds it.

        A cache that cannot be reached grants the lease (fetching twice beats not
        fetching at all).
        """
        try:
            await self._backend.add(f"lease:{key}", owner.encode(), ttl=float(ttl_seconds))
        except ValueError:
            return False
        except Exception as exc:
            self._unavailable("lease", exc)
        return True

    async def release(self, key: str, owner: str) -> None:
        """Give the lease back if ``owner`` still holds it."""
        lease = f"lease:{key}"
        try:
            if isinstance(self._backend, RedisCache):
                script = self._backend.RELEASE_SCRIPT
                await self._backend.client.eval(script, 1, self._backend._build_key(lease), owner)
            elif await self._backend.get(lease) == owner.encode():
                await self._backend.delete(lease)
        except Exception as exc:
            self._unavailable("release", exc)

    def _unavailable(self, op: str, exc: Exception) -> None:
        """Log that the cache failed ``op``: once per operation and error per
        :data:`~webhook.runtime.logs.REPEAT_SECONDS` (an unreachable Redis fails every
        key of every refresh), the next line saying how many were held back."""
        error = type(exc).__name__
        held = self._repeats.let((op, error), time.monotonic())
        if held is not None:
            extra = {"repeated": held} if held else {}
            log.warning("cache_unavailable", cache=self.description, op=op, error=error, **extra)

    async def close(self) -> None:
        """Close connections (Redis)."""
        try:
            await self._backend.close()
        except Exception as exc:
            log.warning("cache_close_failed", cache=self.description, error=type(exc).__name__)


def count_lookup(result: str) -> None:
    """Count one cache lookup: ``hit`` (fresh), ``stale`` (expired entry) or ``miss``."""
    CACHE_LOOKUPS.labels(result).inc()
