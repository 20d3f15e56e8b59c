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
    """``providers`` (Electricity Maps, WattTime) at ``fake``, fast to fail; ``feed``
    overrides the ``feed:`` section."""
    return parse(
        {
            "providers": list(providers),
            "electricitymaps": {"url": f"{fake.url}/v3", "timeout_seconds": 0.3, "retries": 0},
            "watttime": {"url": fake.url, "timeout_seconds": 0.3, "retries": 0},
            "feed": {"backoff_seconds": 0.01, "forecasts": False, **feed},
        }
    )
