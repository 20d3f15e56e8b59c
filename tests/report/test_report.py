"""``carbonshift report`` on fixed data (no cluster): figures per workload and cluster,
the decision history from Events and decision annotations, and one self-contained HTML
page with its three plots."""

from __future__ import annotations

import datetime
import re
from pathlib import Path

import orjson
import pytest

from tests.report.sample import events, ledger, objects, report
from webhook.cli import main
from webhook.model.intensity import Signal
from webhook.report import data, render


def test_figures_per_workload_and_cluster() -> None:
    got = report()
    [web] = [r for r in got.workloads if r.name == "web"]
    assert web.to_json()["avoided_g"] == 1500.0
    assert web.to_json()["saved_percent"] == 75.0
    assert web.intensity == 50.0  # 500 g over 10 kWh
    assert web.moves == 2  # the Event and the annotation's switch inside the day
    clusters = {r.name: r.to_json() for r in got.clusters}
    assert set(clusters) == {"green", "dirty"}  # NodePool zones are not clusters
    assert clusters["dirty"]["avoided_g"] == 1300.0
    assert clusters["dirty"]["intensity_g_per_kwh"] == 150.0
    [fleet] = got.totals
    assert fleet.totals.grams == 900.0
    assert fleet.totals.counterfactual_grams == 2400.0
    assert [e.what for e in got.history] == ["CarbonReplicasMoved", "switch"]
    assert len(got.series) == 25  # the day and the hour it started in
    longer = report("7d")
    assert longer.history[0].what == "CarbonRebalanced"


def test_table_and_json() -> None:
    text = render.table(report())
    assert "PropagationPolicy/shop/web" in text
    assert "1.50 kg" in text
    assert "75.0 %" in text
    assert "DECISION HISTORY" in text
    doc = orjson.loads(render.to_json(report()))
    assert doc["workloads"][0]["signal"] == "average"
    assert doc["history"][0]["what"] == "CarbonReplicasMoved"


def test_html_is_one_self_contained_page_with_three_plots() -> None:
    page = render.page(report())
    assert page.startswith("<!DOCTYPE html>")
    assert page.count("<svg ") == 3
    assert "Carbon intensity per cluster" in page
    assert "Cumulative emissions: actual vs counterfactual" in page
    assert "Replicas per cluster" in page
    assert page.count("<polyline") == 2 + 2 + 2  # clusters, actual+counterfactual, clusters
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", page)  # nothing fetched
    assert "<script" not in page


def test_the_command_reads_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "data.json"
    doc = {"ledger": ledger(), "events": events(), "objects": objects()}
    source.write_bytes(orjson.dumps(doc))
    assert main(["report", "--input", str(source), "--since", "30d", "-o", "json"]) == 0
    got = orjson.loads(capsys.readouterr().out)
    assert {w["name"] for w in got["workloads"]} == {"web", "batch"}
    assert main(["report", "--input", str(source), "-o", "html"]) == 0
    assert capsys.readouterr().out.count("<svg ") == 3
    assert main(["report", "--input", str(source), "--since", "soon"]) == 2
    assert "--since" in capsys.readouterr().err


def test_durations() -> None:
    assert data.duration("7d") == datetime.timedelta(days=7)
    assert data.duration("90m") == datetime.timedelta(minutes=90)
    with pytest.raises(ValueError, match="not a duration"):
        data.duration("7 days")


def test_prometheus_figures_replace_the_ledgers_and_add_what_it_lacks() -> None:
    got = report()
    [web] = [r for r in got.workloads if r.name == "web"]
    key = (web.kind, web.namespace, web.name, str(web.totals.signal), str(web.totals.method))
    lost = ("PropagationPolicy", "shop", "lost", "average", "coefficient")
    mixed = ("PropagationPolicy", "shop", "odd", "unknown-signal", "coefficient")
    data.overlay(got, {key: [2.0, 100.0, 400.0], lost: [1.0, 50.0, 80.0], mixed: [1, 1, 1]})
    assert got.source == "prometheus"
    assert (web.totals.kwh, web.totals.grams, web.totals.avoided_grams) == (2.0, 100.0, 300.0)
    [row] = [r for r in got.workloads if r.name == "lost"]
    assert row.totals.signal == Signal.AVERAGE
    assert row.to_json()["avoided_g"] == 30.0
    assert not [r for r in got.workloads if r.name == "odd"]
