"""Small synthetic grids and scenarios for the simulator tests."""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

import pytest

from tests.simulate.grids import START, MakeGrid, MakeScenario
from webhook.simulate.grid import Grid
from webhook.simulate.scenario import Scenario, parse


@pytest.fixture
def make_grid() -> MakeGrid:
    """A grid from per-zone value lists (all the same length), starting 2023-01-01."""

    def make(values: Mapping[str, Sequence[float]]) -> Grid:
        hours = len(next(iter(values.values())))
        return Grid(START, hours, {z: array("d", v) for z, v in values.items()})

    return make


@pytest.fixture
def make_scenario() -> MakeScenario:
    """A validated scenario of ``hours`` hours from keyword sections."""

    def make(hours: int, **sections: Any) -> Scenario:
        doc = {
            "name": "test",
            "start": START.isoformat(),
            "end": (START + timedelta(hours=hours)).isoformat(),
            "power_kw": 1.0,
            **sections,
        }
        return parse(doc)

    return make
