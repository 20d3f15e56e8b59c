"""Metric publishing: each zone's answer as Prometheus gauges after every refresh, and
the zones no provider has any reading for, loudly: a warning when a zone goes missing,
an info line when it is back, ``carbonshift_zone_data_missing{zone}`` 1 meanwhile. Also
which forecaster ``best`` uses per zone and how well each ranked
(:mod:`webhook.feed.judging`).

Only zones kept warm carry a ``zone`` label: a zone the feed stops keeping (a requested
zone dropped for another) loses its series (:meth:`Publisher.forget`). The warnings about
one zone (missing, a provider fallback) are written at most once per
:data:`~webhook.runtime.logs.REPEAT_SECONDS` each, the next one saying how many were held
back (``repeated``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import structlog

from webhook.feed.judging import FORECASTERS, Judgement
from webhook.feed.memory import Memory
from webhook.runtime.logs import Repeats
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
        self._missing: dict[str, bool] = {}  # zones without data -> whether that was logged
        self._repeats = Repeats()

    def publish(self, memory: Memory, zones: Iterable[str], now: datetime) -> None:
        """Set intensity, data age and staleness of every answered zone in ``zones``, and
        whether each has data at all (logged once per spell without)."""
        for zone in zones:
            answer = memory.answer(zone, now)
            if answer is None:
                self._gone(zone, memory, now)
                continue
            name, reading = answer
            self._back(zone, name)
            previous = self._answering.get(zone)
            if previous is not None and previous != name:
                with contextlib.suppress(KeyError):
                    INTENSITY.remove(zone, previous)
                if (held := self._repeats.let(("fallback", zone), now.timestamp())) is not None:
                    log.warning(
                        "provider_fallback",
                        zone=zone,
                        provider=name,
                        previous=previous,
                        **_repeated(held),
                    )
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

    def forget(self, zone: str) -> None:
        """Remove every series labelled with ``zone`` (a zone no longer kept warm)."""
        provider = self._answering.pop(zone, None)
        self._missing.pop(zone, None)
        removals: list[tuple[Any, tuple[str, ...]]] = [
            (DATA_AGE, (zone,)), (INTENSITY_STALE, (zone,)), (ZONE_DATA_MISSING, (zone,)),
        ]  # fmt: skip
        if provider is not None:
            removals.append((INTENSITY, (zone, provider)))
        for gauge in (FORECAST_CHOICE, FORECAST_RANK_QUALITY, FORECAST_RANK_WINDOWS):
            removals += [(gauge, (zone, forecaster)) for forecaster in FORECASTERS]
        for gauge, labels in removals:
            with contextlib.suppress(KeyError):
                gauge.remove(*labels)

    def _gone(self, zone: str, memory: Memory, now: datetime) -> None:
        ZONE_DATA_MISSING.labels(zone).set(1)
        if zone in self._missing:
            return
        held = self._repeats.let(("missing", zone), now.timestamp())
        self._missing[zone] = held is not None
        if held is not None:
            log.warning(
                "zone_data_missing",
                zone=zone,
                problems=dict(memory.problems.get(zone, {})),
                effect="clusters in this zone rank last until a provider answers for it",
                **_repeated(held),
            )

    def _back(self, zone: str, provider: str) -> None:
        ZONE_DATA_MISSING.labels(zone).set(0)
        if self._missing.pop(zone, False):  # said missing: say back
            log.info("zone_data_back", zone=zone, provider=provider)


def _repeated(held: int) -> dict[str, int]:
    """``repeated=<n>`` on a line after ``n`` like it were held back, else nothing."""
    return {"repeated": held} if held else {}
