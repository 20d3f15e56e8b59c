"""``carbonshift report`` on fixed data (no cluster): figures per workload and cluster,
the decision history from Events and decision annotations, and one self-contained HTML
page with its three plots."""

from __future__ import annotations

import datetime
import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from webhook.cli import main
from webhook.decision.accounting import Totals
from webhook.decision.record import Record
from webhook.kube.accounting import Ledger, ObjectTotals
from webhook.model.intensity import Signal
from webhook.model.vocabulary import DECISION
from webhook.report import data, render

NOW = datetime.datetime(2026, 3, 1, 12, tzinfo=datetime.UTC)


def ledger() -> dict[str, str]:
    """Two days of a fleet: web (ordered fill) on green, dirty when green is full."""
    book = Ledger(since=NOW - datetime.timedelta(days=2), last=NOW)
    web = ObjectTotals(
        totals={"average/coefficient": Totals(Signal.AVERAGE, "coefficient", "electricitymaps",
                                              kwh=10.0, grams=500.0, counterfactual_grams=2000.0,
                                              hours=48.0)},
        places={"green": {"kwh": 8.0, "g": 200.0, "cf_g": 400.0, "rh": 160.0},
                "dirty": {"kwh": 2.0, "g": 300.0, "cf_g": 1600.0, "rh": 40.0}},
    )  # fmt: skip
    pool = ObjectTotals(
        totals={"average/coefficient": Totals(Signal.AVERAGE, "coefficient", "electricitymaps",
                                              kwh=4.0, grams=400.0, counterfactual_grams=400.0,
                                              hours=48.0)},
        places={"eu-north-1a": {"kwh": 4.0, "g": 400.0, "cf_g": 400.0, "rh": 96.0}},
    )  # fmt: skip
    book.objects = {"PropagationPolicy/shop/web": web, "NodePool//batch": pool}
    for h in range(48):
        at = NOW - datetime.timedelta(hours=47 - h)
        point = book.point(at)
        point["i"] = {"green": 40.0 + 20 * (h % 24 > 12), "dirty": 700.0 - 5 * (h % 24)}
        point["r"] = {"green": 4 if h % 24 < 18 else 3, "dirty": 0 if h % 24 < 18 else 1}
        point["g"] = {"average": 500.0 / 48}
        point["c"] = {"average": 2000.0 / 48}
    return book.to_data()


def events() -> list[dict[str, Any]]:
    return [
        {
            "reason": "CarbonReplicasMoved",
            "eventTime": "2026-03-01T06:00:00.000000Z",
            "regarding": {"kind": "PropagationPolicy", "namespace": "shop", "name": "web"},
            "note": "moving 1 replicas of Deployment web back to greener clusters (dirty -1, "
            "green +1): expected intensity 700 -> 40 gCO2eq/kWh",
        },
        {  # outside a 1d window
            "reason": "CarbonRebalanced",
            "eventTime": "2026-02-27T06:00:00.000000Z",
            "regarding": {"kind": "PropagationPolicy", "namespace": "shop", "name": "web"},
            "note": "placement switched",
        },
        {"reason": "Scheduled", "eventTime": "2026-03-01T07:00:00Z", "regarding": {}},
    ]


def objects() -> list[dict[str, Any]]:
    record = Record(body={"switches": [
        {"t": "2026-03-01T09:00:00Z", "from": {"dirty": 1}, "to": {"green": 1},
         "before": 700, "after": 40},
    ]})  # fmt: skip
    return [{
        "kind": "PropagationPolicy",
        "metadata": {"name": "web", "namespace": "shop",
                     "annotations": {DECISION: record.encode()}},
    }]  # fmt: skip


def report(since: str = "1d") -> data.Report:
    return data.build(ledger(), events(), objects(), now=NOW, since=data.duration(since))


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
