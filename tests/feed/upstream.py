"""The feed's tests against a fake provider (:class:`tests.support.FakeUpstream`): its
paths, credentials and a configuration pointing both HTTP providers at it."""

from __future__ import annotations

from typing import Any

from tests.support import FakeUpstream
from webhook.model.config import Config, parse

LATEST = "/v3/carbon-intensity/latest"
FORECAST = "/v3/carbon-intensity/forecast"
ENV = {"ELECTRICITY_MAPS_API_TOKEN": "t", "WATTTIME_USERNAME": "u", "WATTTIME_PASSWORD": "p"}


def config(fake: FakeUpstream, *providers: str, **feed: Any) -> Config:
    """``providers`` (Electricity Maps, WattTime) at ``fake``, no retries; ``feed``
    overrides the ``feed:`` section. The request timeout (5 s) is far above any answer of
    the fake, delayed ones included, so a busy machine never turns an answer into a
    timeout; no test here waits one out (tests/feed/test_outage.py has its own)."""
    return parse(
        {
            "providers": list(providers),
            "electricitymaps": {"url": f"{fake.url}/v3", "timeout_seconds": 5, "retries": 0},
            "watttime": {"url": fake.url, "timeout_seconds": 5, "retries": 0},
            "feed": {"backoff_seconds": 0.01, "forecasts": False, **feed},
        }
    )
