"""Replay of Electricity Maps hourly CSV exports (:mod:`webhook.model.traces`) as a provider.

For demos, simulation and tests without network. Two clocks:

- ``realtime``: the trace hour with the same hour-of-year as now (a 2023 trace
  answers for the same date and hour this year; a shorter trace wraps around).
- ``shifted``: the first hour of the trace maps to the hour the provider started, so
  a demo always begins at the trace's start; it wraps at the end.

The forecast is the trace from the current hour on, ``forecast_hours`` hours long (a
perfect forecast).

Config section ``trace``:

- ``path``: a CSV file or a folder searched recursively for ``*.csv`` (env
  ``CARBONSHIFT_TRACE_PATH``). Zone keys are the files' ``Zone Id`` values.
- ``column``: ``lifecycle`` (default, the API default) or ``direct``.
- ``mode``: ``realtime`` (default) or ``shifted``.
- ``forecast_hours``: 1 to 168, default 24.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from webhook.model import catalog, traces
from webhook.model.errors import ZoneNotSupported
from webhook.model.intensity import Reading, Signal, utcnow
from webhook.model.options import parse
from webhook.model.validation import InvalidInput
from webhook.providers.http import HttpSettings

NAME = catalog.TRACE
PATH_ENV = catalog.TRACE_PATH_ENV
Options = catalog.TraceOptions
MODES = ("realtime", "shifted")
HOUR = timedelta(hours=1)
HISTORY_HOURS = 24
"""Hours of the trace :meth:`TraceProvider.history` answers with."""


class TraceProvider:
    """Hourly values replayed from CSV traces (see the module docstring)."""

    name = NAME
    worst_case_seconds = 1.0
    """Traces are read at start-up: no I/O per call."""

    def __init__(
        self,
        trace_set: Mapping[str, traces.Trace],
        *,
        column: traces.Column = traces.Column.LIFECYCLE,
        mode: str = "realtime",
        forecast_hours: int = 24,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        self.traces = dict(trace_set)
        self.column = column
        self.mode = mode
        self.forecast_hours = forecast_hours
        self._clock = clock
        self._origin = _hour(clock())

    @classmethod
    def from_options(
        cls,
        section: Mapping[str, Any] | None,
        http: HttpSettings,
        env: Mapping[str, str],
        *,
        clock: Callable[[], datetime] = utcnow,
    ) -> TraceProvider:
        """Load the traces named by the config section (see the module docstring);
        ``http`` is unused (no network)."""
        options = parse(section, Options, NAME)
        path = options.path or env.get(PATH_ENV)
        if not path:
            raise InvalidInput(
                f"{NAME}.path", f"set trace.path (or {PATH_ENV}) to a trace CSV file or folder"
            )
        try:
            if Path(path).is_dir():
                loaded = traces.read_folder(path)
            else:
                one = traces.read(path)
                loaded = {one.zone: one}
        except traces.TraceError as exc:
            raise InvalidInput(f"{NAME}.path", str(exc)) from None
        return cls(
            loaded,
            column=traces.Column(options.column),
            mode=options.mode,
            forecast_hours=options.forecast_hours,
            clock=clock,
        )

    def __repr__(self) -> str:
        return f"TraceProvider(zones={sorted(self.traces)!r}, mode={self.mode!r})"

    def zones(self) -> Sequence[str]:
        """Every zone key found in the trace files, sorted."""
        return sorted(self.traces)

    def _trace(self, zone: str) -> traces.Trace:
        try:
            return self.traces[zone]
        except KeyError:
            raise ZoneNotSupported(NAME, f"no trace for zone {zone!r}") from None

    def index(self, trace: traces.Trace, when: datetime) -> int:
        """Row of ``trace`` that answers for the hour containing ``when``."""
        hour = _hour(when)
        if self.mode == "shifted":
            offset = (hour - self._origin) // HOUR
        else:
            year_start = hour.replace(month=1, day=1, hour=0)
            trace_year = trace.times[0].replace(month=1, day=1, hour=0, minute=0, second=0)
            offset = (hour - year_start) // HOUR + (trace_year - trace.times[0]) // HOUR
        return offset % len(trace)

    def _reading(self, trace: traces.Trace, start: datetime, i: int, *, forecast: bool) -> Reading:
        return Reading(
            zone=trace.zone,
            value=trace.values(self.column)[i],
            signal=Signal.AVERAGE,
            valid_from=start,
            valid_to=start + HOUR,
            estimated=forecast or bool(trace.estimated[i]),
            source=f"{NAME}:{Path(trace.path).name}:{self.column.value}",
        )

    async def latest(self, zone: str) -> Reading:
        trace = self._trace(zone)
        now = self._clock()
        return self._reading(trace, _hour(now), self.index(trace, now), forecast=False)

    async def forecast(self, zone: str) -> Sequence[Reading]:
        trace = self._trace(zone)
        start = _hour(self._clock())
        first = self.index(trace, start)
        return [
            self._reading(trace, start + k * HOUR, (first + k) % len(trace), forecast=True)
            for k in range(self.forecast_hours)
        ]

    async def history(self, zone: str) -> Sequence[Reading]:
        """The trace's 24 hours before the current one, oldest first."""
        trace = self._trace(zone)
        start = _hour(self._clock())
        now = self.index(trace, start)
        return [
            self._reading(trace, start - k * HOUR, (now - k) % len(trace), forecast=False)
            for k in range(HISTORY_HOURS, 0, -1)
        ]

    async def close(self) -> None:
        return None


def _hour(when: datetime) -> datetime:
    return when.replace(minute=0, second=0, microsecond=0)
