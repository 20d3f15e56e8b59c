"""The types of the simulator tests' grid and scenario factories (the ``make_grid`` and
``make_scenario`` fixtures of ``tests/simulate/conftest.py``) and when their grids start."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime

from webhook.simulate.grid import Grid
from webhook.simulate.scenario import Scenario

START = datetime(2023, 1, 1, tzinfo=UTC)

MakeGrid = Callable[[Mapping[str, Sequence[float]]], Grid]
MakeScenario = Callable[..., Scenario]
