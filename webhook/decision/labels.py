"""The ``carbonshift.io/intensity`` label of a Karmada Cluster (pure: no I/O, no clock).

:func:`decide` turns a cluster's current label, the time it last changed and the reading
for its grid zone into the class it should carry and the annotations beside it:

1. no reading, or a stale one: nothing changes (stale data never moves a label, nor the
   annotations);
2. the plain class: ``low`` below ``low_below``, ``high`` from ``high_from``, else
   ``medium`` (:func:`webhook.decision.ranking.intensity_class`);
3. hysteresis: leaving the current class needs the intensity ``band`` (relative) past
   the threshold: up to a dirtier class from ``threshold * (1 + band)``, down to a
   greener one below ``threshold * (1 - band)``; inside the band the label stays;
4. at most one change per ``min_interval_seconds`` (measured from ``since``, the time
   of the last change, kept on the Cluster in ``carbonshift.io/intensity-since``);
5. a cluster without a (valid) label gets the plain class at once.

The annotations always describe the reading the label was decided on: intensity, grid
zone, provider, data time, and when the class last changed.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping

from webhook.decision.ranking import intensity_class
from webhook.model import vocabulary
from webhook.model.config import Config
from webhook.model.intensity import Reading
from webhook.model.validation import InvalidInput

RANK = {name: i for i, name in enumerate(vocabulary.INTENSITY_CLASSES)}


@dataclasses.dataclass(frozen=True, slots=True)
class Rule:
    """The settings :func:`decide` reads (from ``labels:`` of the config)."""

    low_below: float
    high_from: float
    band: float = 0.1
    min_interval: datetime.timedelta = datetime.timedelta(minutes=30)

    @classmethod
    def of(cls, config: Config) -> Rule:
        low, high = config.labels.thresholds(config.nodepools)
        return cls(
            low_below=low,
            high_from=high,
            band=config.labels.band,
            min_interval=datetime.timedelta(seconds=config.labels.min_interval_seconds),
        )


@dataclasses.dataclass(frozen=True, slots=True)
class Current:
    """What the Cluster carries now (``None``: absent or malformed)."""

    klass: str | None = None
    since: datetime.datetime | None = None

    @classmethod
    def read(cls, labels: Mapping[str, str], annotations: Mapping[str, str]) -> Current:
        """From a Cluster's labels and annotations; malformed values count as absent."""
        klass: str | None = None
        since: datetime.datetime | None = None
        try:
            raw = labels.get(vocabulary.INTENSITY_CLASS)
            klass = None if raw is None else vocabulary.intensity_class(raw)
        except InvalidInput:
            klass = None
        try:
            raw = annotations.get(vocabulary.INTENSITY_SINCE)
            since = None if raw is None else vocabulary.timestamp(vocabulary.INTENSITY_SINCE, raw)
        except InvalidInput:
            since = None
        return cls(klass, since)


@dataclasses.dataclass(frozen=True, slots=True)
class Marks:
    """What the Cluster should carry: ``None`` means leave it as it is."""

    klass: str | None
    since: datetime.datetime | None
    changed: bool
    """The class label changes (from another class, or from none)."""
    reason: str
    """Why, in words (the Event note when ``changed``)."""
    annotations: Mapping[str, str] | None = None

    def labels(self) -> dict[str, str]:
        return {} if self.klass is None else {vocabulary.INTENSITY_CLASS: self.klass}


def cluster_annotations(reading: Reading, since: datetime.datetime | None) -> dict[str, str]:
    """The annotations beside the label for ``reading``."""
    marks = {
        vocabulary.INTENSITY_VALUE: f"{reading.value:.0f}",
        vocabulary.INTENSITY_ZONE: reading.zone,
        vocabulary.INTENSITY_SOURCE: reading.source,
        vocabulary.INTENSITY_TIME: vocabulary.format_time(reading.valid_from),
    }
    if since is not None:
        marks[vocabulary.INTENSITY_SINCE] = vocabulary.format_time(since)
    return marks


def _describe(reading: Reading) -> str:
    return f"intensity {reading.value:.0f} gCO2eq/kWh ({reading.zone}, {reading.source})"


def _why(klass: str, reading: Reading, rule: Rule, factor: float) -> str:
    low, high = round(rule.low_below * factor, 6), round(rule.high_from * factor, 6)
    band = "" if factor == 1.0 else f" (threshold {'+' if factor > 1 else '-'}{rule.band:.0%} band)"
    if klass == "low":
        return f"{_describe(reading)} is below low_below {low:g}{band}"
    if klass == "high":
        return f"{_describe(reading)} is at or above high_from {high:g}{band}"
    if factor > 1.0:
        return f"{_describe(reading)} is at or above low_below {low:g}{band}"
    if factor < 1.0:
        return f"{_describe(reading)} is below high_from {high:g}{band}"
    return f"{_describe(reading)} is between low_below {low:g} and high_from {high:g}"


def decide(current: Current, reading: Reading | None, rule: Rule, now: datetime.datetime) -> Marks:
    """The class and annotations a Cluster should carry (see the module docstring)."""
    if reading is None:
        return Marks(current.klass, current.since, False, "no intensity for the cluster's zone")
    if reading.stale:
        return Marks(
            current.klass,
            current.since,
            False,
            f"{_describe(reading)} is stale: the label is left as it is",
        )
    plain = intensity_class(reading.value, low_below=rule.low_below, high_from=rule.high_from)
    if current.klass is None:
        why = _why(plain, reading, rule, 1.0)
        return Marks(plain, now, True, why, cluster_annotations(reading, now))
    keep = Marks(
        current.klass,
        current.since,
        False,
        f"{_describe(reading)}: stays {current.klass}",
        cluster_annotations(reading, current.since),
    )
    if plain == current.klass:
        return keep
    factor = 1.0 + rule.band if RANK[plain] > RANK[current.klass] else 1.0 - rule.band
    banded = intensity_class(
        reading.value,
        low_below=round(rule.low_below * factor, 6),
        high_from=round(rule.high_from * factor, 6),
    )
    if banded == current.klass:
        why = f"{_describe(reading)} is within the {rule.band:.0%} band: stays {current.klass}"
        return dataclasses.replace(keep, reason=why)
    if current.since is not None and now - current.since < rule.min_interval:
        wait = current.since + rule.min_interval - now
        why = (
            f"{_describe(reading)} would make it {banded}, but the class changed "
            f"{(now - current.since).total_seconds():.0f} s ago (at most one change per "
            f"{rule.min_interval.total_seconds():.0f} s; {wait.total_seconds():.0f} s to go)"
        )
        return dataclasses.replace(keep, reason=why)
    why = f"{current.klass} -> {banded}: {_why(banded, reading, rule, factor)}"
    return Marks(banded, now, True, why, cluster_annotations(reading, now))
