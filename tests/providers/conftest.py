"""Fixtures for provider tests: a fake upstream and fast resilience settings."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.providers.fakes import FakeUpstream, running_fake
from webhook.providers.http import HttpSettings


@pytest.fixture
async def fake() -> AsyncIterator[FakeUpstream]:
    """A fake provider on 127.0.0.1 (see :mod:`tests.providers.fakes`)."""
    async for server in running_fake():
        yield server


@pytest.fixture
def fast() -> HttpSettings:
    """Short timeouts and backoffs so failure paths run in milliseconds."""
    return HttpSettings(
        timeout_seconds=0.3,
        retries=2,
        backoff_seconds=0.01,
        backoff_max_seconds=0.2,
        breaker_failures=3,
        breaker_reset_seconds=60.0,
    )
