"""``carbonshift report`` on fixed data (no cluster): figures per workload and cluster,
the decision history from Events and decision annotations, and one self-contained HTML
page with its three plots."""

from __future__ import annotations

import datetime
import re
from pathlib import Path

import orjson
import pytest

from tests.report.sample import NOW, events, ledger, objects, report
from webhook.cli import main
from webhook.decision.accounting import Totals
from webhook.decision.ledger import Ledger, ObjectTotals
from webhook.integrations import EVENT_REASONS
from webhook.model.intensity import Signal
from webhook.report import data, render


def test_figures_per_workload_and_cluster() -> None:
    got = report()
    [web] = [r for r in got.workloads if r.name == "web"]
    assert web.to_json()["avoided_g"] == 375.0
    assert web.to_json()["saved_percent"] == pytest.approx(42.86, abs=0.01)
    assert web.intensity == 50.0  # 500 g over 10 kWh
    assert web.moves == 2  # the Event and the annotation's switch inside the day
    clusters = {r.name: r.to_json() for r in got.clusters}
    assert set(clusters) == {"green", "dirty"}  # NodePool zones are not clusters
    assert clusters["dirty"]["intensity_g_per_kwh"] == 150.0
    assert clusters["dirty"]["replica_hours"] == 40.0
    assert clusters["dirty"]["counterfactual_replica_hours"] == 100.0
    assert clusters["green"]["replica_hours_gained"] == 60.0
    [fleet] = got.totals
    assert fleet.totals.grams == 900.0
    assert fleet.totals.counterfactual_grams == 1275.0
    assert [e.what for e in got.history] == ["CarbonReplicasMoved", "switch"]


def test_every_section_covers_one_window_stated_in_the_header() -> None:
    """The ledger's totals run since accounting began (two days ago) and cannot be cut to
    a day: the window widens to two days, and the moves, the history and the plots with it;
    a window longer than the ledger is the one asked for."""
    got = report("1d")
    assert got.window_start == NOW - datetime.timedelta(days=2)
    assert "cannot be cut to the last 1d" in got.window_note
    assert len(got.series) == 48  # every hourly point since accounting began
    assert [e.what for e in got.history] == ["CarbonReplicasMoved", "switch"]
    longer = report("7d")
    assert longer.window_start == NOW - datetime.timedelta(days=7)
    assert longer.window_note == ""
    assert longer.history[0].what == "CarbonRebalanced"
    [web] = [r for r in longer.workloads if r.name == "web"]
    assert web.moves == 3  # the Event before accounting began is in the window too
    assert longer.totals[0].moves == 3
    header = render.table(got).splitlines()[0]
    assert header.startswith(
        "carbonshift report: every section covers 2026-02-27T12:00:00Z to 2026-03-01T12:00:00Z "
        "(since accounting began"
    )
    doc = orjson.loads(render.to_json(got))
    assert doc["window"]["start"] == "2026-02-27T12:00:00Z"
    assert doc["window"]["end"] == "2026-03-01T12:00:00Z"
    assert "cannot be cut" in doc["window"]["note"]
    assert "Every section covers 2026-02-27T12:00:00Z to 2026-03-01T12:00:00Z" in render.page(got)


def test_prometheus_cuts_every_section_to_since() -> None:
    got = report("7d")
    [web] = [r for r in got.workloads if r.name == "web"]
    key = (web.kind, web.namespace, web.name, str(web.totals.signal), str(web.totals.method))
    data.overlay(got, {key: [2.0, 100.0, 400.0]}, start=NOW - datetime.timedelta(hours=4))
    assert got.window_start == NOW - datetime.timedelta(hours=4)
    assert [e.what for e in got.history] == ["switch"]
    assert web.moves == 1
    assert len(got.series) == 5  # the four hours and the hour the window began in
    [pool] = [r for r in got.workloads if r.name == "batch"]
    assert pool.totals.grams == 0.0  # Prometheus counted nothing of it in the window
    [fleet] = got.totals
    assert (fleet.totals.grams, fleet.totals.counterfactual_grams, fleet.moves) == (100, 400, 1)
    assert got.clusters == []
    assert "per-cluster figures left out" in render.table(got).splitlines()[0]


def test_table_and_json() -> None:
    text = render.table(report())
    assert "PropagationPolicy/shop/web" in text
    assert "375.0 g" in text
    assert "42.9 %" in text
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


def test_the_input_files_events_and_objects_are_lists_of_objects(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "data.json"
    source.write_bytes(orjson.dumps({"events": None}))  # no ledger, no objects: nothing yet
    assert main(["report", "--input", str(source), "-o", "json"]) == 0
    assert orjson.loads(capsys.readouterr().out)["workloads"] == []
    for key, value, said in (
        ("events", {"items": []}, "events: expected a list of objects"),
        ("objects", [["not", "an", "object"]], "objects[0]: expected an object"),
    ):
        source.write_bytes(orjson.dumps({"ledger": ledger(), key: value}))
        assert main(["report", "--input", str(source)]) == 2
        assert capsys.readouterr().err == f"carbonshift report: {source}: {said}\n"


def _with(name: str, change: object) -> dict[str, str]:
    """The sample ledger with one of its JSON texts changed (a function of the parsed one,
    or a text)."""
    book = ledger()
    book[name] = (
        change
        if isinstance(change, str)
        else orjson.dumps(
            change(orjson.loads(book[name]))  # type: ignore[operator]
        ).decode()
    )
    return book


def _kwh(value: object) -> object:
    def change(totals: dict[str, dict[str, dict[str, dict[str, object]]]]) -> object:
        totals["PropagationPolicy/shop/web"]["totals"]["average/coefficient"]["kwh"] = value
        return totals

    return change


WEB = 'ledger["totals.json"]["PropagationPolicy/shop/web"]'


@pytest.mark.parametrize(
    ("book", "said"),
    [
        (_with("totals.json", "{not json"), 'ledger["totals.json"]: not JSON text: '),
        (_with("totals.json", _kwh("ten")),
         f'{WEB}.totals["average/coefficient"].kwh: expected a number, got "ten"'),
        (_with("totals.json", _kwh(True)),
         f'{WEB}.totals["average/coefficient"].kwh: expected a number, got true'),
        (_with("totals.json", lambda t: {"web": t["PropagationPolicy/shop/web"]}),
         'ledger["totals.json"]["web"]: expected a key Kind/namespace/name'),
        (_with("meta.json", lambda m: {**m, "since": "yesterday"}),
         'ledger["meta.json"].since: expected a time (RFC 3339), got "yesterday"'),
        (_with("series.json", lambda s: [*s[:3], {**s[3], "r": {"green": "4"}}]),
         'ledger["series.json"][3].r["green"]: expected a number, got "4"'),
        ({"totals.json": {"an": "object"}}, 'ledger["totals.json"]: expected JSON text'),
    ],
)  # fmt: skip
def test_a_malformed_ledger_is_refused_naming_the_file_and_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], book: dict[str, object], said: str
) -> None:
    source = tmp_path / "ledger.json"
    source.write_bytes(orjson.dumps({"ledger": book}))
    assert main(["report", "--input", str(source)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"carbonshift report: {source}: {said}")
    assert captured.err.count("\n") == 1


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
    increases = {key: [2.0, 100.0, 400.0], lost: [1.0, 50.0, 80.0], mixed: [1.0, 1.0, 1.0]}
    data.overlay(got, increases, start=got.window_start)
    assert got.source == "prometheus"
    assert (web.totals.kwh, web.totals.grams, web.totals.avoided_grams) == (2.0, 100.0, 300.0)
    [row] = [r for r in got.workloads if r.name == "lost"]
    assert row.totals.signal == Signal.AVERAGE
    assert row.to_json()["avoided_g"] == 30.0
    assert not [r for r in got.workloads if r.name == "odd"]


def test_a_series_of_one_point_is_drawn_with_markers() -> None:
    got = report()
    got.series = got.series[-1:]  # the first hour of a fresh leader
    page = render.page(got)
    assert page.count('<circle class="marker"') == 2 + 2 + 2  # every line of every plot
    assert "no data in the window" not in page
    assert render.page(report()).count('<circle class="marker"') == 0  # lines need none


def _one_workload(places: dict[str, dict[str, float]]) -> data.Report:
    book = Ledger(since=NOW - datetime.timedelta(days=1), last=NOW)
    grams = sum(p["g"] for p in places.values())
    counterfactual = sum(p["cf_g"] for p in places.values())
    totals = Totals(Signal.AVERAGE, "coefficient", "static", kwh=10.0, grams=grams,
                    counterfactual_grams=counterfactual, hours=24.0)  # fmt: skip
    book.objects = {"PropagationPolicy/shop/web": ObjectTotals({"average/coefficient": totals},
                                                               places)}  # fmt: skip
    point = book.point(NOW)
    point["i"] = {"green": 25.0, "dirty": 150.0, "idle": 50.0}
    book.series = [point]
    return data.build(book.to_data(), [], [], now=NOW, since=datetime.timedelta(days=1),
                      reasons=EVENT_REASONS)  # fmt: skip


def test_the_cluster_table_shows_replica_hours_gained_or_lost_and_emissions_there() -> None:
    """An even split of 200 replica-hours as the counterfactual: green took 60 more than
    its half, dirty ran 60 fewer; idle (never used) lost its 50 counterfactual ones."""
    got = _one_workload({
        "green": {"kwh": 8.0, "g": 200.0, "cf_g": 125.0, "rh": 160.0},   # 25 g/kWh
        "dirty": {"kwh": 2.0, "g": 300.0, "cf_g": 750.0, "rh": 40.0},    # 150 g/kWh
        "idle": {"kwh": 0.0, "g": 0.0, "cf_g": 125.0, "rh": 0.0},        # 50 g/kWh (series)
    })  # fmt: skip
    clusters = {r.name: r for r in got.clusters}
    assert clusters["green"].counterfactual_replica_hours == pytest.approx(100.0)
    assert clusters["green"].replica_hours_gained == pytest.approx(60.0)
    assert clusters["dirty"].replica_hours_gained == pytest.approx(-60.0)
    assert clusters["idle"].replica_hours_gained == pytest.approx(-50.0)
    assert clusters["dirty"].to_json()["replica_hours_gained"] == pytest.approx(-60.0)
    text = render.table(got)
    section = text[text.index("CLUSTERS") :]
    assert "GAINED/LOST R-H" in section
    assert "+60.0" in section
    assert "-60.0" in section
    assert "%" not in section.split("DECISION HISTORY")[0]  # no share saved per cluster
    page = render.page(got)
    clusters_html = page[page.index("<h2>Clusters</h2>") : page.index("<h2>Decision history")]
    assert "GAINED/LOST R-H" in clusters_html
    assert "EMISSIONS THERE" in clusters_html
    assert "%" not in clusters_html
    assert "SAVED" not in clusters_html
