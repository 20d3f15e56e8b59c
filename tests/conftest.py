"""Shared fixtures: a small fleet of clusters and an intensity table built from it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from tests.support import FLEET, Clock, FakeUpstream, reading, running_fake
from webhook.model.config import Config, parse
from webhook.model.intensity import Reading


@pytest.fixture
def config() -> Config:
    """Three member clusters in clearly different grids, local zone DE."""
    return parse(FLEET)


@pytest.fixture
def table() -> dict[str, Reading]:
    """FR green, DE dirty, PL dirtiest."""
    return {"FR": reading("FR", 60.0), "DE": reading("DE", 380.0), "PL": reading("PL", 700.0)}


@pytest.fixture
async def fake() -> AsyncIterator[FakeUpstream]:
    """A fake intensity provider on 127.0.0.1 (see :class:`tests.support.FakeUpstream`)."""
    async for server in running_fake():
        yield server


@pytest.fixture
def clock() -> Clock:
    """A settable clock at 2026-03-01 10:20 UTC (inside an hourly period, not at its start)."""
    return Clock(datetime(2026, 3, 1, 10, 20, tzinfo=UTC))
