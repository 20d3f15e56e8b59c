"""The intensity the simulation replays: one hourly series per grid zone, cut to the scenario."""

from __future__ import annotations

import dataclasses
import difflib
from array import array
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path

from webhook.model.traces import Trace, read_folder
from webhook.model.validation import InvalidInput
from webhook.simulate.scenario import Scenario


@dataclasses.dataclass(frozen=True, slots=True)
class Grid:
    """``values[zone][i]`` is the zone's intensity (gCO2eq/kWh) in hour ``start + i``."""

    start: datetime
    hours: int
    values: Mapping[str, array[float]]

    def time(self, hour: int) -> datetime:
        """Start of simulated hour ``hour``."""
        return self.start + timedelta(hours=hour)

    def history(self, zone: str, hour: int, length: int) -> Sequence[float]:
        """The last ``length`` observed values up to and including ``hour`` (never later)."""
        series = self.values[zone]
        return series[max(0, hour + 1 - length) : hour + 1]


def from_traces(scenario: Scenario, traces: Mapping[str, Trace]) -> Grid:
    """Cut each needed zone's trace to the scenario's span (which the trace must cover)."""
    values: dict[str, array[float]] = {}
    hours = scenario.hours
    for zone in scenario.zones():
        trace = traces.get(zone)
        if trace is None:
            known = ", ".join(sorted(traces)) or "none"
            close = difflib.get_close_matches(zone, sorted(traces), n=1, cutoff=0.6)
            meant = f"; did you mean {close[0]}?" if close else ""
            message = f"no trace for zone {zone!r}{meant} (traces for: {known})"
            raise InvalidInput(_zone_key(scenario, zone), message)
        first = trace.times[0]
        offset = int((scenario.start - first).total_seconds() // 3600)
        if offset < 0 or offset + hours > len(trace):
            last = trace.times[-1] + timedelta(hours=1)
            raise InvalidInput(
                "start",
                f"trace for {zone} covers {first:%Y-%m-%d %H:%M} to {last:%Y-%m-%d %H:%M} UTC, "
                f"not the scenario's {scenario.start:%Y-%m-%d %H:%M} to "
                f"{scenario.end:%Y-%m-%d %H:%M}",
            )
        values[zone] = trace.values(scenario.column)[offset : offset + hours]
    return Grid(scenario.start, hours, values)


def _zone_key(scenario: Scenario, zone: str) -> str:
    """The first key of the scenario that names ``zone``."""
    return next((key for key, named in scenario.zone_keys() if named == zone), "zone")


def load(scenario: Scenario, folder: str | Path) -> Grid:
    """Read the traces below ``folder`` and cut them for ``scenario``."""
    return from_traces(scenario, read_folder(folder))
