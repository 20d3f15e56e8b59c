"""Every figure of ``carbonshift report`` states its basis (location-based, the data set and
its year), no market-based figure is mixed in, and each workload gets its SCI rate
(ISO/IEC 21031) with its functional unit and boundary."""

from __future__ import annotations

import datetime

import orjson
import pytest

from tests.report.sample import NOW, report
from webhook.decision.accounting import Totals
from webhook.model.intensity import Signal
from webhook.report import basis, render

START = NOW - datetime.timedelta(days=2)


STATIC = "static:electricitymaps-2025-lifecycle"
TRACE = "trace:DE-LU_2023_hourly.csv.gz:lifecycle"
LIVE = "electricitymaps:lifecycle"
OLD = "static:electricitymaps-2022-lifecycle"


@pytest.mark.parametrize(
    ("provider", "expected"),
    [
        (STATIC, [(STATIC, "2025")]),
        (TRACE, [(TRACE, "2023")]),
        (LIVE, [(LIVE, "2026")]),  # a live provider: the year of the hours accounted
        (f"{LIVE},{OLD}", [(LIVE, "2026"), (OLD, "2022")]),
        ("", []),
    ],
)
def test_each_data_set_is_named_with_its_year(
    provider: str, expected: list[tuple[str, str]]
) -> None:
    found = basis.data_sets(provider, START, NOW)
    assert [(d["source"], d["year"]) for d in found] == expected


def test_a_window_over_new_year_names_both_years() -> None:
    start = datetime.datetime(2025, 12, 30, tzinfo=datetime.UTC)
    assert basis.data_sets("electricitymaps:lifecycle", start, NOW)[0]["year"] == "2025-2026"


def test_every_row_of_the_json_states_its_basis() -> None:
    doc = report("3d").to_json()
    assert doc["basis"]["scope"] == "location-based"
    assert doc["basis"]["market_based"] is None  # never computed, never mixed in
    assert "no market-based figure" in doc["basis"]["statement"]
    for section in ("totals", "workloads", "clusters"):
        assert doc[section], section
        for row in doc[section]:
            assert row["basis"]["scope"] == "location-based", row
            assert row["basis"]["signal"] == "average", row
            assert row["basis"]["data_sets"] == [{"source": "electricitymaps", "year": "2026"}]


def test_the_sci_rate_per_workload_has_its_functional_unit_and_boundary() -> None:
    doc = report("3d").to_json()
    sci = {f"{w['kind']}/{w['name']}": w["sci"] for w in doc["workloads"]}
    web = sci["PropagationPolicy/web"]
    assert web["standard"].startswith("ISO/IEC 21031")
    assert web["functional_unit"] == "replica-hour"
    assert web["units"] == 200.0  # 160 + 40 replica-hours
    assert web["rate_g_per_unit"] == pytest.approx(500.0 / 200.0)
    assert web["operational_g"] == 500.0
    assert web["embodied_g"] == 0.0
    assert any("market-based" in line for line in web["boundary"]["out"])
    assert any("avoided" in line for line in web["boundary"]["out"])
    assert any("embodied" in line for line in web["boundary"]["in"])
    pool = sci["NodePool/batch"]
    assert pool["functional_unit"] == "vCPU-hour"
    assert pool["rate_g_per_unit"] == pytest.approx(400.0 / 96.0)
    assert "sci" not in doc["totals"][0]  # a rate belongs to a workload, not the fleet sum


def test_sci_adds_embodied_emissions_and_has_no_rate_without_units() -> None:
    totals = Totals(Signal.AVERAGE, "coefficient", "static:electricitymaps-2025-lifecycle",
                    kwh=2.0, grams=110.0, embodied_grams=10.0)  # fmt: skip
    sci = basis.sci(totals, 4.0, "PropagationPolicy")
    assert sci["operational_g"] == 100.0
    assert sci["embodied_g"] == 10.0
    assert sci["rate_g_per_unit"] == pytest.approx(27.5)  # (E x I + M) / R
    assert basis.sci(totals, None, "PropagationPolicy")["rate_g_per_unit"] is None


def test_the_text_and_html_reports_state_the_basis_and_sci() -> None:
    built = report("3d")
    text = render.table(built)
    assert "location-based grid averages" in text
    assert "no market-based figure" in text
    assert "BASIS" in text
    assert "location-based average, electricitymaps (2026)" in text
    assert "SCI (ISO/IEC 21031" in text
    assert "2.500 g  replica-hour" in text
    assert "SCI boundary" in text
    page = render.page(built)
    assert "<h2>Basis</h2>" in page
    assert "<h2>SCI (ISO/IEC 21031)</h2>" in page
    assert "no market-based figure" in page
    assert orjson.loads(render.to_json(built))["basis"]["scope"] == "location-based"
