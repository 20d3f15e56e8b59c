"""The embedded annual table: it answers for every zone the cloud region table yields."""

from __future__ import annotations

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
    for row in annual_table().values():
        assert row.source, row.zone
        assert row.basis in ("lifecycle", "generation", "grid-sales"), row.zone
        assert 2019 <= row.year <= 2024, row.zone


def test_static_takes_no_options() -> None:
    assert isinstance(StaticProvider.from_options(None, HttpSettings(), {}), StaticProvider)
    with pytest.raises(InvalidInput, match=r"^static\.colour: static takes no options$"):
        StaticProvider.from_options({"colour": "green"}, HttpSettings(), {})
