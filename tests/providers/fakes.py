"""A scriptable HTTP server on 127.0.0.1 that plays an intensity provider.

Tests queue replies per path (``fake.on("/v3/carbon-intensity/latest", Reply(...))``);
the last queued reply repeats. Every request is recorded with its query and headers,
and ``fake.calls[path]`` counts them.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import orjson
from aiohttp import web
from aiohttp.test_utils import TestServer


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
