"""The provider registry: one row per provider, one factory signature, one error type."""

from __future__ import annotations

import pytest

from webhook.model.config import Config
from webhook.model.validation import InvalidInput
from webhook.providers.electricitymaps import ElectricityMapsProvider
from webhook.providers.http import HttpSettings
from webhook.providers.registry import PROVIDERS, build_providers
from webhook.providers.static import StaticProvider
from webhook.providers.ukgrid import UKGridProvider


def test_rows_in_chain_order() -> None:
    assert tuple(PROVIDERS) == ("electricitymaps", "watttime", "ukgrid", "static", "trace")
    assert all(name == row.name for name, row in PROVIDERS.items())


def test_build_walks_the_registry() -> None:
    config = Config(providers=("ukgrid", "static"), provider_options={"ukgrid": {"retries": 0}})
    chain = build_providers(config, env={})
    assert [type(p) for p in chain] == [UKGridProvider, StaticProvider]
    assert [p.name for p in chain] == ["ukgrid", "static"]


def test_unknown_name_points_at_its_list_entry() -> None:
    with pytest.raises(InvalidInput) as info:
        build_providers(Config(providers=("static", "carbonara")), env={})
    assert info.value.path == "providers[1]"
    assert "known: electricitymaps, watttime" in info.value.message


@pytest.mark.parametrize("name", list(PROVIDERS))
def test_unknown_key_names_the_known_ones(name: str) -> None:
    row = PROVIDERS[name]
    with pytest.raises(InvalidInput) as info:
        row.check({"colour": "green"})
    assert info.value.path == f"{name}.colour"
    assert "colour" not in info.value.message


HINTS = [
    ("electricitymaps", {"emission_factor": "lca"}, r"lca'; lifecycle \(default\) or direct"),
    ("electricitymaps", {"timeout_seconds": -1}, r">= 0\.05.*; seconds, e\.g\. 5"),
    ("electricitymaps", {"token_file": ""}, r"token_file: .*length >= 1"),
    ("watttime", {"regions": ["CAISO_NORTH"]}, r"e\.g\. \{US-CAL-CISO: CAISO_NORTH\}"),
    ("ukgrid", {"retries": "two"}, r"ukgrid\.retries: .*a whole number"),
    ("trace", {"forecast_hours": 1000}, r"trace\.forecast_hours: .*1 to 168"),
    ("trace", {"mode": "later"}, r"trace\.mode: .*realtime \(default\) or shifted"),
]


@pytest.mark.parametrize(("name", "section", "expected"), HINTS)
def test_bad_values_say_what_to_write(name: str, section: dict[str, object], expected: str) -> None:
    with pytest.raises(InvalidInput, match=expected):
        PROVIDERS[name].check(section)


def test_worst_case_covers_every_request_of_one_fetch() -> None:
    http = HttpSettings(timeout_seconds=2, retries=1, backoff_max_seconds=1)
    one_request = 2 * 2 + 1 * 1
    uk = UKGridProvider.from_options({}, http, {})
    em = ElectricityMapsProvider.from_options({}, http, {"ELECTRICITY_MAPS_API_TOKEN": "t"})
    assert uk.worst_case_seconds == one_request
    assert em.worst_case_seconds == 2 * one_request  # latest, then history
    assert StaticProvider().worst_case_seconds < one_request
