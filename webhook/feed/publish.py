"""Metric publishing: each zone's answer as Prometheus gauges after every refresh, and
the zones no provider has any reading for, loudly: a warning when a zone goes missing,
an info line when it is back, ``carbonshift_zone_data_missing{zone}`` 1 meanwhile. Also
which forecaster ``best`` uses per zone and how well each ranked
(:mod:`webhook.feed.judging`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from datetime import datetime

import structlog

from webhook.feed.judging import FORECASTERS, Judgement
from webhook.feed.memory import Memory
from webhook.runtime.metrics import (
    DATA_AGE,
    FORECAST_CHOICE,
    FORECAST_RANK_QUALITY,
    FORECAST_RANK_WINDOWS,
    INTENSITY,
    INTENSITY_STALE,
    ZONE_DATA_MISSING,
)

log = structlog.get_logger("carbonshift.feed")


class Publisher:
    """Exports the answers; remembers which provider each zone's gauge is labelled with,
    so a fallback replaces the old series instead of leaving it behind."""

    def __init__(self) -> None:
        self._answering: dict[str, str] = {}  # zone -> provider label on INTENSITY
        self._missing: set[str] = set()  # zones logged as missing, not yet back

    def publish(self, memory: Memory, zones: Iterable[str], now: datetime) -> None:
        """Set intensity, data age and staleness of every answered zone in ``zones``, and
        whether each has data at all (logged once per spell without)."""
        for zone in zones:
            answer = memory.answer(zone, now)
            if answer is None:
                self._gone(zone, memory)
                continue
            name, reading = answer
            self._back(zone, name)
            previous = self._answering.get(zone)
            if previous is not None and previous != name:
                with contextlib.suppress(KeyError):
                    INTENSITY.remove(zone, previous)
                log.warning("provider_fallback", zone=zone, provider=name, previous=previous)
            self._answering[zone] = name
            INTENSITY.labels(zone, name).set(reading.value)
            DATA_AGE.labels(zone).set(reading.age_seconds(now))
            INTENSITY_STALE.labels(zone).set(1 if reading.stale else 0)

    def choices(self, judged: Mapping[str, Judgement | None]) -> None:
        """Per zone, the forecaster ``best`` uses (1, the other 0), each one's mean
        Spearman (absent before its first window) and the windows it rests on."""
        for zone, judgement in judged.items():
            for forecaster in FORECASTERS:
                if judgement is None:
                    for gauge in (FORECAST_CHOICE, FORECAST_RANK_QUALITY, FORECAST_RANK_WINDOWS):
                        with contextlib.suppress(KeyError):
                            gauge.remove(zone, forecaster)
                    continue
                quality = judgement.quality[forecaster]
                FORECAST_CHOICE.labels(zone, forecaster).set(judgement.chosen == forecaster)
                FORECAST_RANK_WINDOWS.labels(zone, forecaster).set(quality.windows)
                if quality.windows:
                    FORECAST_RANK_QUALITY.labels(zone, forecaster).set(quality.spearman)
                else:
                    with contextlib.suppress(KeyError):
                        FORECAST_RANK_QUALITY.remove(zone, forecaster)

    def _gone(self, zone: str, memory: Memory) -> None:
        ZONE_DATA_MISSING.labels(zone).set(1)
        if zone in self._missing:
            return
        self._missing.add(zone)
        log.warning(
            "zone_data_missing",
            zone=zone,
            problems=dict(memory.problems.get(zone, {})),
            effect="clusters in this zone rank last until a provider answers for it",
        )

    def _back(self, zone: str, provider: str) -> None:
        ZONE_DATA_MISSING.labels(zone).set(0)
        if zone in self._missing:
            self._missing.discard(zone)
            log.info("zone_data_back", zone=zone, provider=provider)
