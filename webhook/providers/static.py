"""The embedded annual table: the default provider, needs no key and no network."""

from __future__ import annotations

import csv
import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from importlib import resources
from typing import Any

from webhook.model import catalog
from webhook.model.errors import ZoneNotSupported
from webhook.model.intensity import Reading, Signal, utcnow
from webhook.model.options import NoOptions, parse
from webhook.providers.http import HttpSettings

NAME = catalog.STATIC


@dataclasses.dataclass(frozen=True, slots=True)
class AnnualValue:
    """One row of the embedded table."""

    zone: str
    value: float
    year: int
    basis: str
    source: str


@functools.cache
def annual_table() -> Mapping[str, AnnualValue]:
    """All rows of ``data/static_intensity.csv``, by zone key."""
    text = resources.files("webhook").joinpath("data/static_intensity.csv").read_text("utf-8")
    lines = (line for line in text.splitlines() if line and not line.startswith("#"))
    return {
        row["zone"]: AnnualValue(
            zone=row["zone"],
            value=float(row["gco2eq_per_kwh"]),
            year=int(row["year"]),
            basis=row["basis"],
            source=row["source"],
        )
        for row in csv.DictReader(lines)
    }


class StaticProvider:
    """Annual average intensity per zone. Always answers for the zones it knows.

    An annual mean is this table's estimate for every hour, so a reading is valid for
    the current hour and flagged ``estimated``; ``source`` names the table row's origin
    (for example ``static:electricitymaps-2025-lifecycle``: the data set, its year and
    its emission factors).
    """

    name = NAME

    worst_case_seconds = 1.0
    """A table lookup: no network."""

    def __init__(self, clock: Callable[[], datetime] = utcnow) -> None:
        self._clock = clock

    @classmethod
    def from_options(
        cls, section: Mapping[str, Any] | None, http: HttpSettings, env: Mapping[str, str]
    ) -> StaticProvider:
        """The static provider takes no options; any key in its section is an error."""
        parse(section, NoOptions, NAME)
        return cls()

    def zones(self) -> Sequence[str]:
        """Every zone key in the table, sorted."""
        return sorted(annual_table())

    async def latest(self, zone: str) -> Reading:
        try:
            row = annual_table()[zone]
        except KeyError:
            raise ZoneNotSupported(NAME, f"no annual value for zone {zone!r}") from None
        hour = self._clock().replace(minute=0, second=0, microsecond=0)
        return Reading(
            zone=zone,
            value=row.value,
            signal=Signal.AVERAGE,
            valid_from=hour,
            valid_to=hour + timedelta(hours=1),
            estimated=True,
            source=f"{NAME}:{row.source}",
        )

    async def forecast(self, zone: str) -> Sequence[Reading]:
        await self.latest(zone)
        return ()

    async def history(self, zone: str) -> Sequence[Reading]:
        await self.latest(zone)
        return ()

    async def close(self) -> None:
        return None
