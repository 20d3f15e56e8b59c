"""Shared fixtures: a small fleet of clusters and an intensity table built from it."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime

import pytest
import structlog

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


@pytest.fixture(autouse=True)
def logging_restored() -> Iterator[None]:
    """Undo what a test configures for structlog and the root logger (``carbonshift
    serve`` run in-process caches its loggers), so the next test's ``capture_logs`` sees
    every event whatever ran before it."""
    saved = structlog.get_config()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    structlog.configure(**saved)
    root.handlers[:] = handlers
    root.setLevel(level)
