"""Shared fixtures: a small fleet of clusters and an intensity table built from it."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

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


@dataclass(frozen=True)
class LoggingState:
    """What ``carbonshift`` (``main`` and ``logs.configure``) sets process-wide: structlog's
    configuration (its level filter among it) and the root logger's handlers and level."""

    structlog: dict[str, Any]
    handlers: list[logging.Handler]
    level: int

    @classmethod
    def now(cls) -> LoggingState:
        root = logging.getLogger()
        return cls(structlog.get_config(), root.handlers[:], root.level)

    def restore(self) -> None:
        structlog.configure(**self.structlog)
        root = logging.getLogger()
        root.handlers[:] = self.handlers
        root.setLevel(self.level)


@pytest.fixture(scope="session", autouse=True)
def logging_baseline() -> LoggingState:
    """Logging as it is before any test or fixture has configured it (a session fixture is
    set up before the module fixtures of the first test)."""
    return LoggingState.now()


@pytest.fixture(autouse=True)
def logging_restored(logging_baseline: LoggingState) -> Iterator[None]:
    """Put structlog and the root logger back to the session's baseline before and after
    each test, so a test's ``capture_logs`` sees every event whatever ran before it.

    Before: a module fixture set up for this test may have run ``carbonshift ...``
    in-process, and ``main`` configures logging (structlog filtering at warning); the state
    found here is not a clean one to come back to. After: undo what the test configured
    (``carbonshift serve`` run in-process caches its loggers)."""
    logging_baseline.restore()
    yield
    logging_baseline.restore()
