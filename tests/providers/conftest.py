"""Fixtures for provider tests: fast resilience settings (``fake`` and ``clock`` are
shared, in ``tests/conftest.py``)."""

from __future__ import annotations

import pytest

from webhook.providers.http import HttpSettings


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
