"""HTTP machinery shared by the network providers: timeouts, retries, breaker, limits.

One :class:`HttpClient` per provider owns an aiohttp session and turns every outcome
into either parsed JSON or one of the errors of :mod:`webhook.providers.base`:

==========================  =====================================================
upstream outcome            result
==========================  =====================================================
2xx with a JSON body        the parsed body
401 / 403                   :class:`AuthenticationFailed` (not retried, not an outage)
404 / 400                   :class:`ZoneNotSupported` (the zone is unknown upstream)
429                         :class:`RateLimited`; ``Retry-After`` is honoured: short
                            waits are slept through, longer ones make every call fail
                            fast until then without touching the network
5xx, timeout, connection    retried with full jitter, then :class:`ProviderError`;
error, malformed JSON       counts towards the circuit breaker
breaker open                :class:`CircuitOpen` without a request
==========================  =====================================================

Messages name the provider, the host and the path, never headers, query values or
bodies, so credentials cannot leak through them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import email.utils
import random
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, ClassVar
from urllib.parse import urlsplit

import aiohttp
import orjson
import structlog

from webhook.model import resilience
from webhook.model.errors import (
    AuthenticationFailed,
    CircuitOpen,
    ProviderError,
    RateLimited,
    ZoneNotSupported,
)
from webhook.model.options import NetworkOptions
from webhook.providers.breaker import CircuitBreaker
from webhook.runtime.metrics import UPSTREAM_REQUESTS
from webhook.runtime.tasks import closed

log = structlog.get_logger("carbonshift.providers")
_rng = random.SystemRandom()

MAX_BODY_BYTES = 4 * 1024 * 1024
"""Larger upstream bodies are refused (a 72 h WattTime forecast is about 100 KiB)."""


@dataclasses.dataclass(frozen=True, slots=True)
class HttpSettings:
    """Resilience settings for one provider: the ``feed:`` section's
    (:func:`webhook.providers.registry.http_settings`), defaults from
    :mod:`webhook.model.resilience`."""

    timeout_seconds: float = resilience.TIMEOUT_SECONDS
    """Total time for one HTTP request, connect to last byte."""
    retries: int = resilience.RETRIES
    """Extra attempts after a transient failure (so ``retries + 1`` requests at most)."""
    backoff_seconds: float = resilience.BACKOFF_SECONDS
    """Base of the exponential backoff between attempts; each sleep is full-jittered."""
    backoff_max_seconds: float = 5.0
    """Cap of one backoff sleep; a ``Retry-After`` up to this long is slept through."""
    breaker_failures: int = resilience.BREAKER_FAILURES
    """Consecutive outage-like failures that open the circuit."""
    breaker_reset_seconds: float = resilience.BREAKER_RESET_SECONDS
    """How long an open circuit stays open before one trial call."""

    def with_options(self, options: NetworkOptions) -> HttpSettings:
        """Per-provider overrides (``timeout_seconds``, ``retries``) from its section."""
        return dataclasses.replace(
            self,
            timeout_seconds=(
                self.timeout_seconds if options.timeout_seconds is None else options.timeout_seconds
            ),
            retries=self.retries if options.retries is None else options.retries,
        )

    def worst_case_seconds(self) -> float:
        """Upper bound of one :meth:`HttpClient.get_json` call (used for cache leases)."""
        attempts = self.retries + 1
        return attempts * self.timeout_seconds + self.retries * self.backoff_max_seconds


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date); None if absent."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


class _Transient(Exception):
    """An attempt failed in a way worth retrying; ``status`` labels the metric."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status


class HttpClient:
    """JSON over HTTP for one provider, with the behaviour in the module docstring."""

    def __init__(
        self, provider: str, base_url: str, settings: HttpSettings, *, auth_hint: str = ""
    ) -> None:
        self.provider = provider
        self.auth_hint = auth_hint
        self.base_url = base_url.rstrip("/")
        self.settings = settings
        self.breaker = CircuitBreaker(
            provider,
            failures=settings.breaker_failures,
            reset_seconds=settings.breaker_reset_seconds,
        )
        parts = urlsplit(self.base_url)
        self._host = parts.hostname or "?"
        if parts.port:
            self._host = f"{self._host}:{parts.port}"
        self._session: aiohttp.ClientSession | None = None
        self._not_before = 0.0  # monotonic time before which a 429 says: do not call

    def __repr__(self) -> str:
        return f"HttpClient({self.provider!r}, host={self._host!r})"

    def where(self, path: str) -> str:
        """``host/path`` for messages: no scheme credentials, no query string."""
        return f"{self._host}{urlsplit(self.base_url).path}/{path.lstrip('/')}"

    def url(self, path: str) -> str:
        """Absolute URL of ``path`` below the base URL (a leading ``/`` keeps the base path)."""
        return f"{self.base_url}/{path.lstrip('/')}"

    def _ensure_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.settings.timeout_seconds),
                headers={"User-Agent": "carbonshift"},
                raise_for_status=False,
            )
        return self._session

    async def close(self) -> None:
        """Close the session (idempotent)."""
        if self._session is not None and not self._session.closed:
            await closed(self._session.close(), tls=self.base_url.startswith("https:"))
        self._session = None

    async def get_json(
        self,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        zone: str | None = None,
        url: str | None = None,
    ) -> Any:
        """GET ``path`` (or the absolute ``url``) and return the parsed JSON body."""
        target = url or self.url(path)
        what = self.where(path) if url is None else f"{self._host}{urlsplit(url).path}"
        wait = self._not_before - time.monotonic()
        if wait > 0:
            raise RateLimited(
                self.provider,
                f"rate limited by {self._host}; waiting {wait:.0f}s as Retry-After asked",
                retry_after=wait,
            )
        attempts = self.settings.retries + 1
        last: _Transient | None = None
        for attempt in range(attempts):
            if not self.breaker.allow():
                raise CircuitOpen(
                    self.provider,
                    f"circuit open after repeated failures of {self._host}; next try in "
                    f"{self.breaker.retry_in():.0f}s",
                )
            try:
                body = await self._attempt(
                    target, what=what, params=params, headers=headers, zone=zone
                )
            except _Transient as exc:
                self.breaker.failure()
                last = exc
            except RateLimited as exc:
                self.breaker.success()  # the provider is up, just busy
                delay = exc.retry_after
                if (
                    delay is not None
                    and delay <= self.settings.backoff_max_seconds
                    and (attempt + 1 < attempts)
                ):
                    await asyncio.sleep(delay)
                    continue
                self._not_before = time.monotonic() + (
                    delay if delay is not None else self.settings.backoff_max_seconds
                )
                raise
            except ProviderError:
                self.breaker.success()
                raise
            except BaseException:
                self.breaker.abandon()
                raise
            else:
                self.breaker.success()
                return body
            if attempt + 1 < attempts:
                cap = min(
                    self.settings.backoff_max_seconds, self.settings.backoff_seconds * 2**attempt
                )
                await asyncio.sleep(_rng.uniform(0, cap))
        assert last is not None
        raise ProviderError(self.provider, f"{last} (after {attempts} attempts)")

    async def _attempt(
        self,
        url: str,
        *,
        what: str,
        params: Mapping[str, str] | None,
        headers: Mapping[str, str] | None,
        zone: str | None,
    ) -> Any:
        session = self._ensure_session()
        timeout = aiohttp.ClientTimeout(total=self.settings.timeout_seconds)
        subject = f" for zone {zone}" if zone else ""
        try:
            async with session.get(url, params=params, headers=headers, timeout=timeout) as resp:
                status = resp.status
                UPSTREAM_REQUESTS.labels(self.provider, str(status)).inc()
                if status in (401, 403):
                    raise AuthenticationFailed(
                        self.provider,
                        f"{what} answered {status}: the credentials were refused{subject}"
                        f" (not an outage){'; ' + self.auth_hint if self.auth_hint else ''}",
                        status,
                    )
                if status == 429:
                    retry_after = parse_retry_after(resp.headers.get("Retry-After"))
                    hint = f"; Retry-After {retry_after:.0f}s" if retry_after is not None else ""
                    raise RateLimited(
                        self.provider, f"{what} answered 429 (rate limited){hint}", retry_after
                    )
                if status in (400, 404):
                    raise ZoneNotSupported(
                        self.provider, f"{what} answered {status}: no data{subject}"
                    )
                if status >= 500:
                    raise _Transient(str(status), f"{what} answered {status}{subject}")
                if status >= 300:
                    raise ProviderError(self.provider, f"{what} answered {status}{subject}")
                raw = await resp.content.read(MAX_BODY_BYTES + 1)
        except TimeoutError:
            UPSTREAM_REQUESTS.labels(self.provider, "timeout").inc()
            raise _Transient(
                "timeout", f"{what} timed out after {self.settings.timeout_seconds:g}s{subject}"
            ) from None
        except aiohttp.ClientError as exc:
            UPSTREAM_REQUESTS.labels(self.provider, "connection_error").inc()
            raise _Transient("connection_error", f"{what}: {type(exc).__name__}{subject}") from None
        if len(raw) > MAX_BODY_BYTES:
            raise _Transient("too_large", f"{what} sent more than {MAX_BODY_BYTES} bytes")
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise _Transient(
                "invalid_json", f"{what} sent a body that is not JSON{subject}"
            ) from None


class HttpProvider:
    """What every network provider shares: its :class:`HttpClient` (``http``), how long
    one fetch may take, a repr without secrets, and closing. ``calls_per_fetch`` is how
    many requests one ``latest`` may make (fallbacks, logins)."""

    http: HttpClient
    calls_per_fetch: ClassVar[int] = 1

    @property
    def worst_case_seconds(self) -> float:
        """Every request of one fetch at its worst (see :meth:`HttpSettings.worst_case_seconds`)."""
        return self.calls_per_fetch * self.http.settings.worst_case_seconds()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(url={self.http.where('')!r})"

    async def close(self) -> None:
        """Close the HTTP session."""
        await self.http.close()
