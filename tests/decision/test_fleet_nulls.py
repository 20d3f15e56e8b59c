"""A Karmada Cluster is validated by msgspec structs: a JSON null is an absent field (as
Go's decoder reads it), a wrong type is refused naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.decision.fleet import entry
from webhook.model.config import Config
from webhook.model.validation import InvalidInput

NO_CONFIG = Config()


@pytest.mark.parametrize(
    "obj",
    [
        {
            "metadata": {"name": "fr", "labels": None, "annotations": None},
            "spec": {"region": "eu-west-3"},
        },
        {
            "metadata": {"name": "fr"},
            "spec": {"region": "eu-west-3", "provider": None, "zones": None},
        },
        {"metadata": {"name": "fr", "labels": {"carbonshift.io/zone": "FR"}}, "spec": None},
    ],
)
def test_nulls_read_as_absent_fields(obj: dict[str, Any]) -> None:
    found = entry(obj, NO_CONFIG)
    assert (found.name, found.grid_zone, found.zones) == ("fr", "FR", ())


@pytest.mark.parametrize(
    ("obj", "path"),
    [
        ({"metadata": {"name": ["fr"]}}, "metadata.name"),
        ({"metadata": None}, "metadata"),
        ({"metadata": {"name": "fr"}, "spec": {"zones": ["a", 3]}}, "spec.zones[1]"),
        ({"metadata": {"name": "fr"}, "spec": {"zone": 3}}, "spec.zone"),
    ],
)
def test_a_wrong_type_names_the_field(obj: dict[str, Any], path: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        entry(obj, NO_CONFIG)
    assert caught.value.path == path
