"""Fixtures for the scheduler API: a feed with fixed intensities and an app with the routes."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from webhook.feed import IntensityFeed
from webhook.model.config import Config
from webhook.model.errors import ZoneNotSupported
from webhook.model.intensity import Reading, Signal
from webhook.serve import schedapi
from webhook.serve.state import STATE, ServerState

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


@pytest.fixture
async def state() -> ServerState:
    return await make_state()


@pytest.fixture
async def client(state: ServerState) -> AsyncIterator[TestClient[web.Request, web.Application]]:
    async with TestClient(TestServer(make_app(state), host="127.0.0.1")) as c:
        yield c
