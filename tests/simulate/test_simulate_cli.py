"""``carbonshift simulate`` end to end on CSV traces written in the export format."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from webhook.cli import simulate as cli

HEADER = (
    "Datetime (UTC),Country,Zone Name,Zone Id,Carbon Intensity gCO\u2082eq/kWh (direct),"
    "Carbon Intensity gCO\u2082eq/kWh (LCA),Low Carbon Percentage,Renewable Percentage,"
    "Data Source,Data Estimated,Data Estimation Method"
)

SCENARIO = """\
name: cli-test
start: 2023-01-01T00:00:00Z
end: 2023-01-03T00:00:00Z
power_kw: 1
clusters:
  - {name: green, zone: GR, capacity: {replicas: 3}}
  - {name: dirty, zone: DI}
workloads:
  - {name: web, replicas: 4}
batch:
  - {name: ci, zone: DI, length_hours: 1, slack_hours: 6}
compare: {top_n: 1, max_clusters: 1}
"""


def _write_trace(folder: Path, zone: str, values: list[float]) -> None:
    (folder / zone).mkdir(parents=True)
    lines = [HEADER]
    for h, v in enumerate(values):
        stamp = f"2023-01-{1 + h // 24:02d} {h % 24:02d}:00:00"
        lines.append(f"{stamp},X,X,{zone},{v * 0.8},{v},50,50,test,false,")
    (folder / zone / f"{zone}_2023_hourly.csv").write_text("\n".join(lines) + "\n", "utf-8")


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path]:
    traces = tmp_path / "traces"
    _write_trace(traces, "GR", [50.0 + 40 * ((h // 6) % 2) for h in range(48)])
    _write_trace(traces, "DI", [400.0 - 10 * (h % 24) for h in range(48)])
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SCENARIO, "utf-8")
    return scenario, traces


def test_table_output(setup: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    scenario, traces = setup
    assert cli.main([str(scenario), "--traces", str(traces), "--no-progress"]) == 0
    out = capsys.readouterr().out
    for word in ("baseline", "greedy-top1", "green-first", "oracle", "pause-forecast", "run-now"):
        assert word in out
    assert "Electricity Maps" in out
    # The oracles write no policy (updates n/a) and show the moves their hour-to-hour
    # placements need: the free and the constrained oracle at least the budget oracle's.
    spatial = out.split("\n\n")[1]
    oracles = [line.split() for line in spatial.splitlines() if line.startswith("oracle")]
    assert [row[0] for row in oracles] == ["oracle-budget", "oracle-free", "oracle"]
    assert all(row[7] == "n/a" for row in oracles), oracles
    moves = [float(row[6]) for row in oracles]  # a number for each: no n/a
    assert moves[0] <= moves[2], oracles
    assert oracles[0][5] == "100.0"  # of itself
    assert "budget oracle: at most 10% of greedy's moves" in spatial
    baseline = next(line.split() for line in spatial.splitlines() if line.startswith("baseline"))
    assert baseline[5:8] == ["0.0", "0.00", "0.00"]


def test_json_output(setup: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    scenario, traces = setup
    code = cli.main([str(scenario), "--traces", str(traces), "--json", "--policies", "green-first"])
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    keys = [r["policy"] for r in doc["spatial"]]
    assert keys == ["baseline", "green-first", "oracle-budget", "oracle-free", "oracle"]
    oracle = doc["spatial"][-1]
    assert oracle["constrained_oracle_captured_pct"] == 100.0
    assert doc["spatial"][-2]["free_oracle_captured_pct"] == 100.0
    assert oracle["free_oracle_captured_pct"] <= 100.0
    assert all(r["kg_co2eq"] >= oracle["kg_co2eq"] for r in doc["spatial"])
    assert all(isinstance(r["moves_per_day"], float) for r in doc["spatial"][-2:])
    assert [r["updates_per_day"] for r in doc["spatial"][-3:]] == [None, None, None]
    budget = doc["spatial"][-3]
    assert budget["budget_oracle_captured_pct"] == 100.0
    assert budget["kg_co2eq"] >= oracle["kg_co2eq"]
    assert budget["moves_per_day"] * doc["hours"] / 24 <= doc["budget_oracle"]["move_budget"]
    assert doc["budget_oracle"]["share_of_greedy"] == 0.1
    assert doc["spatial"][0]["moves_per_day"] == 0.0


def test_sweep_and_errors(setup: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    scenario, traces = setup
    args = [str(scenario), "--traces", str(traces), "--sweep", "policy.hysteresis.margin=0,0.2"]
    assert cli.main([*args, "--policies", "green-first"]) == 0
    out = capsys.readouterr().out
    assert "[policy.hysteresis.margin=0]" in out
    assert "[policy.hysteresis.margin=0.2]" in out
    assert cli.main([*args, "--policies", "nope"]) == 2
    assert "unknown policy nope" in capsys.readouterr().err
    bad = [str(scenario), "--traces", str(traces), "--set", "policy.weighting.exponent=x"]
    assert cli.main(bad) == 2
    err = capsys.readouterr().err
    assert err == "carbonshift simulate: policy.weighting.exponent: expected float, got str\n"
    assert cli.main([str(scenario), "--traces", str(traces), "--set", "exponent=2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "exponent: moved to policy.weighting.exponent" in err


def test_a_nested_product_key_set_on_the_command_line(
    setup: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    scenario, traces = setup
    args = [str(scenario), "--traces", str(traces), "--json", "--no-progress"]
    args += ["--policies", "pause-class"]
    assert cli.main(args) == 0
    default = json.loads(capsys.readouterr().out)
    assert default["policy"] == {}
    assert default["compare"]["top_n"] == 1
    assert default["compare"]["forecast"] == "day-ahead-profile"
    lower = ["policy.nodepools.low_below=100", "policy.nodepools.high_from=200", "compare.top_n=2"]
    assert cli.main([*args, *(f"--set={s}" for s in lower)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["policy"] == {"nodepools": {"low_below": 100.0, "high_from": 200.0}}
    assert doc["compare"]["top_n"] == 2
    rows = {r["policy"]: r for r in doc["temporal"]}
    before = {r["policy"]: r for r in default["temporal"]}
    assert "(>= 200)" in rows["pause-class"]["label"]
    assert rows["pause-class"]["kg_co2eq"] < before["pause-class"]["kg_co2eq"]  # paused longer
    assert rows["run-now"] == before["run-now"]


def test_report_without_matplotlib_says_how_to_install(
    setup: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    scenario, traces = setup
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "matplotlib" else real(name, *a),
    )
    code = cli.main([str(scenario), "--traces", str(traces), "--report", str(tmp_path / "r")])
    assert code == 2
    assert "pip install 'carbonshift[sim]'" in capsys.readouterr().err


def test_html_report(setup: tuple[Path, Path], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    scenario, traces = setup
    out = tmp_path / "report"
    assert cli.main([str(scenario), "--traces", str(traces), "--report", str(out)]) == 0
    page = (out / "index.html").read_text("utf-8")
    for png in ("intensity.png", "cumulative-spatial.png", "cumulative-temporal.png", "shares.png"):
        assert (out / png).stat().st_size > 0
        assert png in page


def test_add_parser_registers_simulate() -> None:
    import argparse  # noqa: PLC0415

    parser = argparse.ArgumentParser(prog="carbonshift")
    cli.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["simulate", "x.yaml", "--traces", "t", "--json"])
    assert args.handler is cli.run
    assert args.json is True


def test_without_the_forecast_extra_the_seasonal_rows_are_left_out_in_one_line(
    setup: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    scenario, traces = setup
    assert cli.main([str(scenario), "--traces", str(traces), "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert "pause-forecast-seasonal" in captured.out
    assert "not installed" not in captured.err
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "statsmodels" else real(name, *a),
    )
    assert cli.main([str(scenario), "--traces", str(traces), "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert "seasonal" not in captured.out  # neither its rows nor its ranking
    assert "pause-forecast-sure" in captured.out
    assert captured.err.splitlines() == [
        "carbonshift simulate: the seasonal forecaster needs statsmodels, which is not"
        " installed (pip install 'carbonshift[forecast]'): it is not offered"
    ]
