"""The benchmarks that need the sandbox's binaries run here in a short mode, so neither can
break unseen (nothing is recorded; the figures are `make bench`'s): the fleet benchmark on
ten Clusters for a second, the scheduler benchmark with ten bindings over ten Clusters."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import fleet, schedule
from tests.project.test_bench_short import unrecorded, wrk

__all__ = ["wrk"]  # the fixture, reused as it is


@pytest.mark.timeout(600)
@pytest.mark.usefixtures("wrk")
def test_the_fleet_benchmark_runs_short(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    tables = unrecorded(monkeypatch, tmp_path, (fleet,))
    results = fleet.main(seconds=1, count=10)
    assert results["clusters"] == 13  # the sandbox's three members besides
    assert results["mutate_with_fleet"]["rps"] > 0, results  # type: ignore[index]
    assert tables == ["fleet"]


@pytest.mark.timeout(900)
def test_the_scheduler_benchmark_runs_short(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    tables = unrecorded(monkeypatch, tmp_path, (schedule,))
    results = schedule.main(clusters=10, bindings=10)
    assert (tmp_path / "schedule.json").exists(), results
    assert tables == ["schedule"]
