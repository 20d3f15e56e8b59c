"""The README's example fleet and its replay are one fleet: every member cluster of
config/example.yaml (what `make run` serves) sits on a grid zone the shipped 2023 hourly
traces hold, scenarios/example-fleet-2023.yaml replays exactly those clusters on exactly
those zones, and a week of it runs through `carbonshift simulate`."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import orjson
import pytest

from webhook.cli import main
from webhook.decision.fleet import configured_zone
from webhook.model.config import load as load_config
from webhook.model.traces import SHIPPED, read_folder
from webhook.simulate.policies import DEFAULT_SPATIAL
from webhook.simulate.scenario import load as load_scenario

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "config" / "example.yaml"
SCENARIO = ROOT / "scenarios" / "example-fleet-2023.yaml"


def _example_zones() -> dict[str, str | None]:
    """Each member cluster of the example config with the grid zone carbonshift gives it:
    its ``zone:``, else its provider and region through the region table."""
    config = load_config(EXAMPLE)
    return {
        name: configured_zone(name, cluster.provider, cluster.region, config)[0]
        for name, cluster in config.clusters.items()
    }


def test_every_member_of_the_example_fleet_has_a_shipped_trace() -> None:
    zones = _example_zones()
    assert len(zones) >= 2, zones  # a fleet to choose between
    traced = set(read_folder(SHIPPED))
    missing = {name: zone for name, zone in zones.items() if zone not in traced}
    assert not missing, f"config/example.yaml: no shipped 2023 trace for {missing}"


def test_the_scenario_replays_exactly_the_example_fleet() -> None:
    scenario = load_scenario(SCENARIO)
    replayed = {cluster.name: cluster.zone for cluster in scenario.clusters}
    assert replayed == _example_zones()


def test_a_week_of_the_example_fleet_runs_through_carbonshift_simulate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    start = load_scenario(SCENARIO).start
    end = (start + timedelta(days=7)).strftime("%Y-%m-%dT%H:%M:%SZ")
    text, found = re.subn(r"(?m)^end: .*$", f"end: {end}", SCENARIO.read_text("utf-8"))
    assert found == 1
    week = tmp_path / "week.yaml"
    week.write_text(text, "utf-8")
    assert main(["simulate", str(week), "--json", "--no-progress"]) == 0
    out = orjson.loads(capsys.readouterr().out)
    assert (out["scenario"], out["hours"]) == ("example-fleet-2023", 7 * 24)
    assert out["zones"] == sorted({z for z in _example_zones().values() if z})
    rows = {row["policy"]: row for row in out["spatial"]}
    assert {"baseline", "oracle", DEFAULT_SPATIAL} <= rows.keys()
    assert all(row["kg_co2eq"] > 0 for row in rows.values())
    assert rows[DEFAULT_SPATIAL]["kg_co2eq"] <= rows["baseline"]["kg_co2eq"]
