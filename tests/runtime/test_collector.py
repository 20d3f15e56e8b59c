"""The collector's thresholds: what the app manager runs under, and gives back."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.serving import serving
from webhook.model.config import parse
from webhook.runtime import collector


@pytest.fixture
def thresholds() -> Iterator[tuple[int, int, int]]:
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield gc.get_threshold()
    gc.set_threshold(*before)


def test_tune_raises_the_youngest_threshold_only(thresholds: tuple[int, int, int]) -> None:
    assert collector.tune() == thresholds
    assert gc.get_threshold() == (collector.YOUNG, 10, 10)


async def test_the_app_runs_tuned_and_restores_the_thresholds(
    thresholds: tuple[int, int, int], tmp_path: Path
) -> None:
    async with serving(parse({"zone": "FR"}), tmp_path):
        assert gc.get_threshold() == (collector.YOUNG, 10, 10)
    assert gc.get_threshold() == thresholds
