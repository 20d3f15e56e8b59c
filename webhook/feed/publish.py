"""Metric publishing: each zone's answer as Prometheus gauges after every refresh."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from datetime import datetime

import structlog

from webhook.feed.memory import Memory
from webhook.runtime.metrics import DATA_AGE, INTENSITY, INTENSITY_STALE

log = structlog.get_logger("carbonshift.feed")


class Publisher:
    """Exports the answers; remembers which provider each zone's gauge is labelled with,
    so a fallback replaces the old series instead of leaving it behind."""

    def __init__(self) -> None:
        self._answering: dict[str, str] = {}  # zone -> provider label on INTENSITY

    def publish(self, memory: Memory, zones: Iterable[str], now: datetime) -> None:
        """Set intensity, data age and staleness of every answered zone in ``zones``."""
        for zone in zones:
            answer = memory.answer(zone, now)
            if answer is None:
                continue
            name, reading = answer
            previous = self._answering.get(zone)
            if previous is not None and previous != name:
                with contextlib.suppress(KeyError):
                    INTENSITY.remove(zone, previous)
                log.warning("provider_fallback", zone=zone, provider=name, previous=previous)
            self._answering[zone] = name
            INTENSITY.labels(zone, name).set(reading.value)
            DATA_AGE.labels(zone).set(reading.age_seconds(now))
            INTENSITY_STALE.labels(zone).set(1 if reading.stale else 0)
