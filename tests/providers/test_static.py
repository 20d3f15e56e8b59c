"""The embedded annual table: it answers for every zone the cloud region table yields."""

from __future__ import annotations

from importlib import resources

import pytest

from tests.support import NOW
from webhook.model.regions import BY_PROVIDER
from webhook.model.validation import InvalidInput
from webhook.providers.http import HttpSettings
from webhook.providers.static import StaticProvider, annual_table

REGIONS = sorted(
    (cloud, region, zone) for cloud, table in BY_PROVIDER.items() for region, zone in table.items()
)


@pytest.mark.parametrize(("cloud", "region", "zone"), REGIONS, ids=str)
async def test_every_cloud_region_zone_has_an_annual_value(
    cloud: str, region: str, zone: str
) -> None:
    reading = await StaticProvider(clock=lambda: NOW).latest(zone)
    assert reading.zone == zone
    assert 0 < reading.value < 1200, f"{cloud} {region}: implausible value"
    assert reading.source.startswith("static:")


def test_every_row_names_its_source() -> None:
    """One basis for every row; the source names the data set, its year and emission factors."""
    for row in annual_table().values():
        assert row.basis == "lifecycle-consumption", row.zone
        assert row.source == f"electricitymaps-{row.year}-lifecycle", row.zone
        assert row.year in (2022, 2025), row.zone


def test_rows_carry_the_newest_year_where_one_is_published() -> None:
    """Electricity Maps 2025 everywhere but the three zones it no longer publishes."""
    older = {row.zone for row in annual_table().values() if row.year != 2025}
    assert older == {"IN-MH", "IN-UP", "US-HI-OA"}


async def test_a_reading_names_the_data_set_and_its_year() -> None:
    reading = await StaticProvider(clock=lambda: NOW).latest("FR")
    assert reading.source == "static:electricitymaps-2025-lifecycle"
    assert reading.value == 31.0
    assert reading.estimated
    older = await StaticProvider(clock=lambda: NOW).latest("IN-MH")
    assert older.source == "static:electricitymaps-2022-lifecycle"


def test_the_table_keeps_its_attribution() -> None:
    """ODbL: the shipped file says whose data it is and under which licence."""
    text = (resources.files("webhook") / "data" / "static_intensity.csv").read_text("utf-8")
    header = "\n".join(line for line in text.splitlines() if line.startswith("#"))
    assert "Electricity Maps" in header
    assert "Open Database License (ODbL) v1.0" in header
    assert "thegreenwebfoundation/co2.js" in header
    assert "consumption-based" in header
    assert "market-based" in header


def test_static_takes_no_options() -> None:
    assert isinstance(StaticProvider.from_options(None, HttpSettings(), {}), StaticProvider)
    with pytest.raises(InvalidInput, match=r"^static\.colour: static takes no options$"):
        StaticProvider.from_options({"colour": "green"}, HttpSettings(), {})
