"""Fixtures for feed tests: a fake upstream, a settable clock, a quick config."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from tests.providers.fakes import FakeUpstream, running_fake


class Clock:
    """A settable UTC clock for the feed (providers' HTTP timing stays real)."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)

    def hour(self) -> datetime:
        return self.now.replace(minute=0, second=0, microsecond=0)


@pytest.fixture
async def fake() -> AsyncIterator[FakeUpstream]:
    async for server in running_fake():
        yield server


@pytest.fixture
def clock() -> Clock:
    return Clock(datetime(2026, 3, 1, 10, 20, tzinfo=UTC))
