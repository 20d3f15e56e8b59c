"""A fake Electricity Maps whose readings are valid until the end of the current
:data:`WINDOW`, counting its calls per (zone, window): what a shared cache must call once."""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime, timedelta

from aiohttp import web

from tests.support import FakeUpstream, Reply, em_latest, iso

WINDOW = 3
"""Seconds of validity of each reading the fake hands out."""


class WindowedProvider:
    """Scripts the fake: readings valid until the end of the current WINDOW."""

    def __init__(self, fake: FakeUpstream) -> None:
        self.latest: Counter[tuple[str, int]] = Counter()
        self.forecast: Counter[str] = Counter()
        fake.on("/v3/carbon-intensity/latest", self._latest)
        fake.on("/v3/carbon-intensity/forecast", self._forecast)

    def _latest(self, request: web.Request) -> Reply:
        zone = request.query["zone"]
        window = int(time.time() // WINDOW)
        self.latest[zone, window] += 1
        end = datetime.fromtimestamp((window + 1) * WINDOW, UTC)
        start = end - timedelta(minutes=5)
        values = {"DE": 380, "FR": 60, "PL": 700}
        return Reply(em_latest(zone, values[zone], start, temporalGranularity="5_minutes"))

    def _forecast(self, request: web.Request) -> Reply:
        zone = request.query["zone"]
        self.forecast[zone] += 1
        first = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=10)
        points = [
            {"carbonIntensity": 100 + h, "datetime": iso(first + timedelta(hours=h))}
            for h in range(24)
        ]
        return Reply({"zone": zone, "forecast": points})
