"""Helpers shared by the test suites (import as ``tests.support``).

- :data:`NOW`, :data:`FLEET`, :func:`reading`: a fixed instant, a small fleet, readings.
- :class:`Clock`: a settable clock for code that takes ``clock=`` (or ``monotonic=``).
- :class:`FixedProvider`, :func:`make_state`, :func:`make_app`: a provider with a fixed
  table, a server state whose feed holds it, an app with only the scheduler API's routes.
- :class:`FakeUpstream`: a scriptable HTTP server on 127.0.0.1 that plays an intensity
  provider. Tests queue replies per path (``fake.on("/v3/carbon-intensity/latest",
  Reply(...))``); the last queued reply repeats. Every request is recorded with its query
  and headers, and ``fake.calls[path]`` counts them. The ``fake`` fixture
  (``tests/conftest.py``) is one, started and closed around the test.
- :func:`eventually`: how an async test waits for state another task, thread or process
  changes: poll with a deadline, never a bare sleep before an assertion (a busy machine
  outruns any sleep); a failure names what was awaited and shows what was seen.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import orjson
from aiohttp import web
from aiohttp.test_utils import TestServer

from webhook.feed import IntensityFeed
from webhook.model.config import Config
from webhook.model.errors import ZoneNotSupported
from webhook.model.intensity import Reading, Signal
from webhook.serve import schedapi
from webhook.serve.state import STATE, ServerState

T = TypeVar("T")

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)

FLEET: dict[str, Any] = {
    "zone": "DE",
    "clusters": {
        "member-fr": {
            "zone": "FR",
            "labels": {"tier": "prod"},
            "provider": "aws",
            "region": "eu-west-3",
            "zones": ["eu-west-3a"],
        },
        "member-de": {
            "zone": "DE",
            "labels": {"tier": "prod"},
            "provider": "aws",
            "region": "eu-central-1",
            "zones": ["eu-central-1a"],
        },
        "member-pl": {
            "zone": "PL",
            "labels": {"tier": "dev"},
            "provider": "gcp",
            "region": "europe-central2",
            "zones": ["europe-central2-a"],
        },
    },
}
"""Three member clusters in clearly different grids; local zone DE."""


def reading(zone: str, value: float, **overrides: Any) -> Reading:
    """An hourly average reading valid at :data:`NOW`."""
    fields: dict[str, Any] = {
        "zone": zone,
        "value": value,
        "signal": Signal.AVERAGE,
        "valid_from": NOW,
        "valid_to": NOW + timedelta(hours=1),
        "estimated": False,
        "source": "test",
    }
    fields.update(overrides)
    return Reading(**fields)


class Clock:
    """A settable UTC clock: call it for ``now``; move it with :meth:`advance` or by
    setting ``now``. :meth:`monotonic` is the same clock as seconds, for code that takes
    a monotonic clock (token lifetimes)."""

    def __init__(self, now: datetime = NOW) -> None:
        self.now = now
        self._start = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        """Move forward by ``timedelta(**delta)``."""
        self.now += timedelta(**delta)

    def hour(self) -> datetime:
        """Start of the current hour."""
        return self.now.replace(minute=0, second=0, microsecond=0)

    def monotonic(self) -> float:
        """Seconds since the clock was made (plus 1000, so never zero)."""
        return 1000.0 + (self.now - self._start).total_seconds()


INTENSITIES: Mapping[str, float] = {
    "SE-SE3": 30.0,
    "FR": 50.0,
    "DE": 400.0,
    "IN-WE": 650.0,
    "PL": 700.0,
}
"""gCO2eq/kWh served by :class:`FixedProvider`."""


class FixedProvider:
    """A provider that knows a fixed table and nothing else."""

    name = "fixed"
    worst_case_seconds = 1.0

    def __init__(self, values: Mapping[str, float]) -> None:
        self.values = dict(values)
        self.asked: list[str] = []

    async def latest(self, zone: str) -> Reading:
        self.asked.append(zone)
        if zone not in self.values:
            raise ZoneNotSupported(self.name, f"no data for {zone}")
        hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
        return Reading(
            zone=zone,
            value=self.values[zone],
            signal=Signal.AVERAGE,
            valid_from=hour,
            valid_to=hour + timedelta(hours=1),
            estimated=False,
            source="fixed:test",
        )

    async def forecast(self, zone: str) -> Sequence[Reading]:
        return []

    async def history(self, zone: str) -> Sequence[Reading]:
        return []

    async def close(self) -> None:
        return None


async def make_state(
    config: Config | None = None, values: Mapping[str, float] = INTENSITIES
) -> ServerState:
    """A ServerState whose feed already holds ``values``."""
    feed = IntensityFeed([FixedProvider(values)], values.keys())
    await feed.refresh_once()
    return ServerState(config or Config(), feed)


def make_app(state: ServerState) -> web.Application:
    """An application with only the scheduler routes."""
    app = web.Application()
    app[STATE] = state
    schedapi.add_routes(app)
    return app


@dataclasses.dataclass
class Reply:
    """One scripted answer: JSON (or a raw body), status, headers, an optional delay."""

    json: Any = None
    status: int = 200
    headers: Mapping[str, str] = dataclasses.field(default_factory=dict)
    body: bytes | None = None
    delay: float = 0.0


Responder = Callable[[web.Request], Reply]


@dataclasses.dataclass
class Seen:
    """One request as the fake saw it."""

    path: str
    query: Mapping[str, str]
    headers: Mapping[str, str]


class FakeUpstream:
    """The fake provider; ``url`` is its base URL once started."""

    def __init__(self) -> None:
        self.replies: dict[str, list[Reply | Responder]] = defaultdict(list)
        self.calls: Counter[str] = Counter()
        self.seen: list[Seen] = []
        self.url = ""
        self._server: TestServer | None = None

    def on(self, path: str, *replies: Reply | Responder) -> None:
        """Replace the script for ``path`` (exact path, no query)."""
        self.replies[path] = list(replies)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        self.calls[path] += 1
        self.seen.append(Seen(path, dict(request.query), dict(request.headers)))
        queue = self.replies.get(path)
        if not queue:
            return web.json_response({"error": "not found"}, status=404)
        item = queue.pop(0) if len(queue) > 1 else queue[0]
        reply = item(request) if callable(item) else item
        if reply.delay:
            await asyncio.sleep(reply.delay)
        body = reply.body if reply.body is not None else orjson.dumps(reply.json)
        return web.Response(
            body=body,
            status=reply.status,
            headers={"Content-Type": "application/json", **reply.headers},
        )

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", self._handle)
        self._server = TestServer(app, host="127.0.0.1", port=0)
        await self._server.start_server()
        self.url = str(self._server.make_url("")).rstrip("/")

    async def close(self) -> None:
        if self._server is not None:
            await self._server.close()


async def running_fake() -> AsyncIterator[FakeUpstream]:
    """Fixture body: a started fake, closed afterwards."""
    fake = FakeUpstream()
    await fake.start()
    try:
        yield fake
    finally:
        await fake.close()


def iso(when: datetime) -> str:
    """Electricity Maps style timestamp: milliseconds and ``Z``."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def em_latest(zone: str, value: float | None, when: datetime, **extra: Any) -> dict[str, Any]:
    """An Electricity Maps ``carbon-intensity/latest`` body."""
    return {
        "zone": zone,
        "carbonIntensity": value,
        "datetime": iso(when),
        "updatedAt": iso(when),
        "createdAt": iso(when),
        "emissionFactorType": "lifecycle",
        "isEstimated": False,
        "estimationMethod": None,
        **extra,
    }


POLL_SECONDS = 0.01
"""How often :func:`eventually` looks."""


async def eventually(
    check: Callable[[], T],
    what: str,
    *,
    seconds: float = 10.0,
    seen: Callable[[], object] | None = None,
) -> T:
    """Poll ``check()`` until it returns something truthy, and return that. Past
    ``seconds`` (generous: a deadline only matters when the condition never comes) fail,
    naming ``what`` and showing what was seen: ``seen()``, else ``check()``'s last value.

    ``await eventually(lambda: loop.passes >= 3, "three passes", seen=lambda: loop.passes)``
    """
    deadline = time.monotonic() + seconds
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            saw = seen() if seen is not None else got
            raise AssertionError(f"{what}: not reached in {seconds:g} s; saw {saw!r}")
        await asyncio.sleep(POLL_SECONDS)


async def awaited(
    check: Callable[[], Awaitable[T]],
    what: str,
    *,
    seconds: float = 30.0,
    every: float = 0.05,
) -> T:
    """:func:`eventually` for a check that must be awaited (an HTTP call, a subprocess):
    its first truthy result, or past ``seconds`` an AssertionError naming ``what`` and the
    last result seen."""
    deadline = time.monotonic() + seconds
    while True:
        got = await check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not reached in {seconds:g} s; saw {got!r}")
        await asyncio.sleep(every)
