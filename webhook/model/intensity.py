"""Carbon-intensity readings: the provider-neutral signal every decision consumes.

A :class:`Reading` is one value for one grid zone over a validity window. Values are
always gCO2eq/kWh; providers that speak other units convert before building one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import UTC, datetime
from enum import StrEnum


class Signal(StrEnum):
    """Which kind of intensity a reading carries. Never rank one against the other."""

    AVERAGE = "average"
    """Average (attributional) intensity of the electricity consumed in the zone."""
    MARGINAL = "marginal"
    """Marginal intensity: emissions of the plant that answers the next kWh (WattTime MOER)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Reading:
    """One carbon-intensity value for one zone.

    ``valid_from``/``valid_to`` bound the period the value describes (for the static
    table: the reference year). ``estimated`` is the provider's own flag; ``stale`` is
    set by the feed when the reading is older than the configured maximum age.
    """

    zone: str
    value: float
    signal: Signal
    valid_from: datetime
    valid_to: datetime
    estimated: bool
    source: str
    stale: bool = False

    def __post_init__(self) -> None:
        if not self.zone:
            raise ValueError("a reading needs a zone")
        if self.value != self.value or self.value < 0:  # NaN or negative
            raise ValueError(f"intensity for {self.zone} must be a number >= 0, got {self.value}")
        if self.valid_to < self.valid_from:
            raise ValueError(f"reading for {self.zone} ends before it starts")

    def age_seconds(self, now: datetime) -> float:
        """Seconds since the start of the period this reading describes (never negative)."""
        return max(0.0, (now - self.valid_from).total_seconds())


IntensityTable = Mapping[str, Reading]
"""What the decision core sees: the latest reading per zone, answered from memory."""


def utcnow() -> datetime:
    """Timezone-aware current time in UTC (a single place to stub in tests)."""
    return datetime.now(UTC)
