"""Shared fixtures: a small fleet of clusters and an intensity table built from it."""

from __future__ import annotations

import pytest

from tests.support import FLEET, reading
from webhook.config import Config, parse
from webhook.intensity import Reading


@pytest.fixture
def config() -> Config:
    """Three member clusters in clearly different grids, local zone DE."""
    return parse(FLEET)


@pytest.fixture
def table() -> dict[str, Reading]:
    """FR green, DE dirty, PL dirtiest."""
    return {"FR": reading("FR", 60.0), "DE": reading("DE", 380.0), "PL": reading("PL", 700.0)}
