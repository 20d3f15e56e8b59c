"""Hourly intensity traces in the Electricity Maps data-portal CSV export format.

Columns are matched by meaning, not exact text: export vintages differ
(``Carbon Intensity gCO₂eq/kWh (LCA)`` vs ``Carbon intensity gCO₂eq/kWh (Life cycle)``,
``Zone Id`` vs ``Zone id``). Files may be gzip-compressed (``*.csv.gz``). Used by the
``trace`` provider and by the simulator.
"""

from __future__ import annotations

import csv
import dataclasses
import gzip
from array import array
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import TextIO

from webhook.model.errors import TraceError as TraceError  # noqa: PLC0414 - callers import it here
from webhook.model.vocabulary import parse_time

SHIPPED = Path(__file__).resolve().parents[1] / "data" / "traces" / "electricitymaps-hourly-2023"
"""The trace set shipped in the package: Electricity Maps hourly 2023 exports for 10 zones,
gzip-compressed (ODbL 1.0; attribution and changes in its ``NOTICE``)."""


class Column(StrEnum):
    """Which intensity column of the export to use."""

    LIFECYCLE = "lifecycle"
    """Life-cycle emissions (the Electricity Maps API default)."""
    DIRECT = "direct"
    """Operational (direct) emissions only."""


@dataclasses.dataclass(frozen=True, slots=True)
class Trace:
    """One zone's hourly series. ``times[i]`` is the start of hour ``i`` (UTC)."""

    zone: str
    times: Sequence[datetime]
    direct: array[float]
    lifecycle: array[float]
    estimated: array[int]
    path: str = ""

    def values(self, column: Column) -> array[float]:
        """The chosen intensity column."""
        return self.lifecycle if column is Column.LIFECYCLE else self.direct

    def index_at(self, when: datetime) -> int:
        """Index of the hour containing ``when`` (clamped to the trace's span)."""
        hours = int((when - self.times[0]).total_seconds() // 3600)
        return min(max(hours, 0), len(self.times) - 1)

    def __len__(self) -> int:
        return len(self.times)


def _find(header: Sequence[str], *needles: str, required: bool = True) -> int:
    lowered = [h.lower() for h in header]
    for i, name in enumerate(lowered):
        if all(n in name for n in needles):
            return i
    if required:
        raise TraceError(f"no column matching {' + '.join(needles)!r} in header {header}")
    return -1


def _open(path: Path) -> TextIO:
    if path.name.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8", newline="")
    return path.open(encoding="utf-8", newline="")


def read(path: str | Path) -> Trace:
    """Load one export file (``*.gz``: gzip-compressed). Rows must be hourly and in time order."""
    path = Path(path)
    try:
        handle = _open(path)
    except OSError as exc:
        raise TraceError(f"cannot open trace {path}: {exc.strerror}") from None
    with handle:
        try:
            return _parse(path, csv.reader(handle))
        except (OSError, EOFError) as exc:  # a damaged .gz shows up while reading
            raise TraceError(f"cannot read trace {path}: {exc}") from None


def _parse(path: Path, rows: Iterator[list[str]]) -> Trace:
    try:
        header = next(rows)
    except StopIteration:
        raise TraceError(f"trace {path} is empty") from None
    t_col = _find(header, "datetime")
    z_col = _find(header, "zone id")
    d_col = _find(header, "(direct)")
    l_col = _find(header, "(lca)", required=False)
    if l_col < 0:
        l_col = _find(header, "(life cycle)")
    e_col = _find(header, "estimated", required=False)
    times: list[datetime] = []
    direct, lifecycle, estimated = array("d"), array("d"), array("b")
    zone = ""
    for lineno, row in enumerate(rows, start=2):
        if not row:
            continue
        try:
            when = parse_time(row[t_col], provider=True)
            direct.append(float(row[d_col]))
            lifecycle.append(float(row[l_col]))
        except (ValueError, IndexError):
            raise TraceError(f"{path}:{lineno}: not a valid row") from None
        if times and when - times[-1] != timedelta(hours=1):
            raise TraceError(f"{path}:{lineno}: rows must be consecutive hours")
        times.append(when)
        zone = zone or row[z_col].strip()
        estimated.append(1 if e_col >= 0 and row[e_col].strip().lower() == "true" else 0)
    if not times:
        raise TraceError(f"trace {path} has no rows")
    return Trace(zone, times, direct, lifecycle, estimated, str(path))


def discover(folder: str | Path) -> Iterator[Path]:
    """Every ``*.csv`` and ``*.csv.gz`` below ``folder``, sorted (one or more per zone)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise TraceError(f"trace folder {folder} does not exist")
    yield from sorted([*folder.rglob("*.csv"), *folder.rglob("*.csv.gz")])


def read_folder(folder: str | Path) -> dict[str, Trace]:
    """All traces below ``folder``, by zone key."""
    traces = {}
    for path in discover(folder):
        trace = read(path)
        traces[trace.zone] = trace
    if not traces:
        raise TraceError(f"no *.csv or *.csv.gz traces below {folder}")
    return traces
