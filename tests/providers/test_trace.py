"""Trace replay: real-time and shifted clocks, columns, zones from files."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.support import Clock
from webhook.model import traces
from webhook.model.errors import ZoneNotSupported
from webhook.model.validation import InvalidInput
from webhook.providers.http import HttpSettings
from webhook.providers.trace import TraceProvider

HEADER = (
    "Datetime (UTC),Country,Zone Name,Zone Id,Carbon Intensity gCO\u2082eq/kWh (direct),"
    "Carbon Intensity gCO\u2082eq/kWh (LCA),Low Carbon Percentage,Renewable Percentage,"
    "Data Source,Data Estimated,Data Estimation Method"
)


def write_trace(folder: Path, zone: str, hours: int = 48) -> Path:
    path = folder / zone / f"{zone}_2023_hourly.csv"
    path.parent.mkdir(parents=True)
    start = datetime(2023, 1, 1)
    rows = [HEADER]
    for h in range(hours):
        when = (start + timedelta(hours=h)).strftime("%Y-%m-%d %H:%M:%S")
        estimated = "true" if h == 5 else "false"
        rows.append(f"{when},X,X,{zone},{h}.5,{100 + h}.0,1,1, src;  x,{estimated},")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


HTTP = HttpSettings()


async def test_realtime_uses_same_hour_of_year(tmp_path: Path) -> None:
    write_trace(tmp_path, "DE")
    clock = Clock(datetime(2026, 1, 1, 5, 30, tzinfo=UTC))
    provider = TraceProvider.from_options({"path": str(tmp_path)}, HTTP, {}, clock=clock)
    reading = await provider.latest("DE")
    assert reading.value == 105.0  # lifecycle, hour 5
    assert reading.estimated
    assert reading.valid_from == datetime(2026, 1, 1, 5, tzinfo=UTC)
    assert reading.source == "trace:DE_2023_hourly.csv:lifecycle"
    clock.now = datetime(2026, 1, 3, 1, tzinfo=UTC)  # hour 49 wraps to hour 1 of 48
    assert (await provider.latest("DE")).value == 101.0


async def test_shifted_maps_trace_start_to_now_and_direct_column(tmp_path: Path) -> None:
    write_trace(tmp_path, "GB")
    clock = Clock(datetime(2026, 7, 9, 14, 10, tzinfo=UTC))
    provider = TraceProvider.from_options(
        {"path": str(tmp_path), "mode": "shifted", "column": "direct", "forecast_hours": 3},
        HTTP,
        {},
        clock=clock,
    )
    assert (await provider.latest("GB")).value == 0.5
    clock.now += timedelta(hours=2)
    assert (await provider.latest("GB")).value == 2.5
    forecast = await provider.forecast("GB")
    assert [r.value for r in forecast] == [2.5, 3.5, 4.5]
    assert forecast[0].valid_from == datetime(2026, 7, 9, 16, tzinfo=UTC)


async def test_history_is_the_traces_day_before_now(tmp_path: Path) -> None:
    write_trace(tmp_path, "DE")
    clock = Clock(datetime(2026, 1, 1, 5, 30, tzinfo=UTC))  # hour 5 of the trace
    provider = TraceProvider.from_options({"path": str(tmp_path)}, HTTP, {}, clock=clock)
    past = await provider.history("DE")
    assert len(past) == 24
    # hours -19 .. 4 of a 48-hour trace: the wrap goes to its end (hour 29 .. 47, 0 .. 4)
    assert [r.value for r in past] == [100.0 + (h % 48) for h in range(29, 53)]
    assert past[-1].valid_from == datetime(2026, 1, 1, 4, tzinfo=UTC)
    assert past[0].valid_from == datetime(2025, 12, 31, 5, tzinfo=UTC)
    assert not past[-1].estimated


async def test_zones_and_options(tmp_path: Path) -> None:
    write_trace(tmp_path, "DE")
    single = write_trace(tmp_path, "FR")
    provider = TraceProvider.from_options({}, HTTP, {"CARBONSHIFT_TRACE_PATH": str(tmp_path)})
    assert provider.zones() == ["DE", "FR"]
    with pytest.raises(ZoneNotSupported):
        await provider.latest("PL")
    assert TraceProvider.from_options({"path": str(single)}, HTTP, {}).zones() == ["FR"]
    with pytest.raises(InvalidInput, match=r"trace\.path"):
        TraceProvider.from_options({}, HTTP, {})
    with pytest.raises(InvalidInput, match=r"trace\.path"):
        TraceProvider.from_options({"path": str(tmp_path / "nope")}, HTTP, {})
    with pytest.raises(InvalidInput, match=r"trace\.mode"):
        TraceProvider.from_options({"path": str(tmp_path), "mode": "later"}, HTTP, {})
    with pytest.raises(InvalidInput, match=r"trace\.forecast_hours"):
        TraceProvider.from_options({"path": str(tmp_path), "forecast_hours": 1000}, HTTP, {})


async def test_shipped_trace_set_loads_every_zone() -> None:
    provider = TraceProvider.from_options({"path": str(traces.SHIPPED)}, HTTP, {})
    assert {"DE", "GB", "US-CAL-CISO", "JP-TK"} <= set(provider.zones())
    reading = await provider.latest("GB")
    assert 0 < reading.value < 1000
