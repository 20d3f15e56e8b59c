"""The default behaviour rows and the data attribution of ``carbonshift simulate``."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import msgspec
import pytest

from webhook.cli import simulate as cli
from webhook.decision.forecast import RANK_HOURS
from webhook.kinds.reevaluation import METHODS, replayed
from webhook.model.config import Config, ReevaluateConfig, overlay
from webhook.model.vocabulary import DEFAULT_MAX_PAUSE
from webhook.simulate import report
from webhook.simulate.batch import DEFAULT_TEMPORAL, batch_policies
from webhook.simulate.grid import Grid
from webhook.simulate.pausing import ZONE, OverTime
from webhook.simulate.policies import DEFAULT_SPATIAL, WebhookProposal, spatial_policies
from webhook.simulate.scenario import Compare

HEADER = (
    "Datetime (UTC),Country,Zone Name,Zone Id,Carbon Intensity gCO\u2082eq/kWh (direct),"
    "Carbon Intensity gCO\u2082eq/kWh (LCA),Low Carbon Percentage,Renewable Percentage,"
    "Data Source,Data Estimated,Data Estimation Method"
)

SCENARIO = """\
name: years-test
start: {start}
end: {end}
power_kw: 1
clusters:
  - {{name: green, zone: GR, capacity: {{replicas: 3}}}}
  - {{name: dirty, zone: DI}}
workloads:
  - {{name: web, replicas: 4}}
batch:
  - {{name: ci, zone: DI, length_hours: 1, slack_hours: 6}}
compare: {{top_n: 1, max_clusters: 1}}
"""


def _write_trace(folder: Path, zone: str, start: datetime, values: list[float]) -> None:
    (folder / zone).mkdir(parents=True)
    lines = [HEADER]
    for h, v in enumerate(values):
        stamp = f"{start + timedelta(hours=h):%Y-%m-%d %H:%M:%S}"
        lines.append(f"{stamp},X,X,{zone},{v * 0.8},{v},50,50,test,false,")
    (folder / zone / f"{zone}_{start.year}_hourly.csv").write_text("\n".join(lines) + "\n", "utf-8")


def _setup(tmp_path: Path, start: datetime, hours: int = 48) -> tuple[Path, Path]:
    traces = tmp_path / "traces"
    _write_trace(traces, "GR", start, [50.0 + 40 * ((h // 6) % 2) for h in range(hours)])
    _write_trace(traces, "DI", start, [400.0 - 10 * (h % 24) for h in range(hours)])
    scenario = tmp_path / "s.yaml"
    end = start + timedelta(hours=hours)
    scenario.write_text(SCENARIO.format(start=start.isoformat(), end=end.isoformat()), "utf-8")
    return scenario, traces


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert cli.main([*args, "--no-progress"]) == 0
    return capsys.readouterr().out


def test_json_marks_exactly_one_default_row_per_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario, traces = _setup(tmp_path, datetime(2023, 1, 1, tzinfo=UTC))
    doc = json.loads(_run([str(scenario), "--traces", str(traces), "--json"], capsys))
    for part, key in (("spatial", DEFAULT_SPATIAL), ("temporal", DEFAULT_TEMPORAL)):
        marked = [r["policy"] for r in doc[part] if r["default"] is True]
        assert marked == [key]
        assert all(isinstance(r["default"], bool) for r in doc[part])


def test_text_marks_the_default_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario, traces = _setup(tmp_path, datetime(2023, 1, 1, tzinfo=UTC))
    out = _run([str(scenario), "--traces", str(traces)], capsys)
    assert out.count("(default)") == 2
    assert f"{DEFAULT_SPATIAL} (default)" in out
    assert f"{DEFAULT_TEMPORAL} (default)" in out


def test_default_keys_are_in_the_lineups() -> None:
    spatial = [p.key for p in spatial_policies(Config(), Compare(), ["a", "b"])]
    temporal = [p.key for p in batch_policies(Config(), Compare())]
    assert spatial.count(DEFAULT_SPATIAL) == 1
    assert temporal.count(DEFAULT_TEMPORAL) == 1


def test_default_rows_run_what_the_default_config_runs() -> None:
    """The rows marked default use the forecast the reconciler uses with the default config,
    the default hysteresis and the default ``max-pause``."""
    config = Config()
    method = replayed(METHODS[config.reevaluate.forecast])
    compare = Compare()
    spatial = {p.key: p for p in spatial_policies(config, compare, ["a", "b"])}[DEFAULT_SPATIAL]
    assert spatial.forecast == method == compare.forecast
    assert spatial.horizon_hours == RANK_HOURS == compare.forecast_hours
    assert isinstance(spatial.propose, WebhookProposal)
    assert spatial.propose.config.hysteresis == config.hysteresis
    assert spatial.propose.config.rebalance == config.rebalance
    temporal = {p.key: p for p in batch_policies(config, compare)}[DEFAULT_TEMPORAL]
    assert isinstance(temporal.paused, OverTime)
    assert temporal.paused.forecast == method
    assert temporal.paused.config == msgspec.structs.replace(
        config, zone=ZONE, reevaluate=ReevaluateConfig(forecast="day-ahead-profile")
    )
    assert temporal.paused.max_pause == DEFAULT_MAX_PAUSE
    assert not temporal.deadline_guard  # the webhook knows no deadlines


def test_attribution_names_the_traces_year(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario, traces = _setup(tmp_path, datetime(2021, 3, 1, tzinfo=UTC))
    out = _run([str(scenario), "--traces", str(traces)], capsys)
    assert "Electricity Maps (hourly 2021 exports" in out
    assert "2023" not in out
    doc = json.loads(_run([str(scenario), "--traces", str(traces), "--json"], capsys))
    assert doc["years"] == "2021"
    assert "hourly 2021 exports" in doc["attribution"]
    sweep = [str(scenario), "--traces", str(traces), "--sweep", "policy.hysteresis.margin=0,0.2"]
    assert "hourly 2021 exports" in _run(sweep, capsys)


def test_attribution_spanning_two_years() -> None:
    grid = Grid(datetime(2022, 12, 31, 12, tzinfo=UTC), 24, {})
    assert report.years(grid) == "2022-2023"
    assert "hourly 2022-2023 exports" in report.attribution(grid)
    assert report.years(Grid(datetime(2022, 12, 31, 12, tzinfo=UTC), 12, {})) == "2022"


def test_the_webhooks_pause_resumes_at_max_pause() -> None:
    from webhook.simulate.batch import PoolMoment  # noqa: PLC0415

    low = overlay(Config(), {"nodepools": {"low_below": 100, "high_from": 400}})
    rule = OverTime(max_pause=timedelta(hours=3), base=low)

    def at(hour: int) -> bool:
        return rule(PoolMoment(hour, 500.0, 24, 1, lambda n: [500.0] * n))

    assert [at(h) for h in range(6)] == [True, True, True, False, True, True]
    rule.reset()
    assert rule.state.paused_at is None
