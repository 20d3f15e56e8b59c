"""Every benchmark runs in CI in a short mode, so none can break unseen (the figures
themselves are `make bench`'s, on an idle machine; here nothing is recorded): the leader's
passes at 300 policies, the admission and score runs a second each, the soak in two
one-second segments. The fleet and scheduler benchmarks, which need the sandbox's binaries,
run short among the end-to-end tests (tests/e2e/test_bench_sandbox.py)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from types import ModuleType

import pytest

from bench import admission, reevaluate, score, soak

RECORDERS: tuple[ModuleType, ...] = (admission, reevaluate, score, soak)


def unrecorded(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, modules: tuple[ModuleType, ...] = RECORDERS
) -> list[str]:
    """Results of ``modules`` go to ``tmp_path`` and the docs' tables are left alone; the
    tables the benchmarks would have written, by name."""
    tables: list[str] = []
    for module in modules:
        monkeypatch.setattr(module, "RESULTS", tmp_path)
        monkeypatch.setattr(module, "write_table", lambda name, _table: tables.append(name))
    return tables


@pytest.fixture
def wrk() -> None:
    """wrk (Debian package) drives the HTTP benchmarks: skipped without it, failed in CI."""
    if shutil.which("wrk") is None or shutil.which("taskset") is None:
        reason = "wrk or taskset is missing: apt-get install wrk util-linux"
        if os.environ.get("CI") == "true":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)


@pytest.mark.timeout(600)
def test_the_leaders_benchmark_runs_in_its_short_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("POLICIES", "CLUSTERS", "TARGET_CPU_SECONDS", "TARGET_RSS_MB"):
        monkeypatch.setattr(reevaluate, name, getattr(reevaluate, name))  # restored after
    result = reevaluate.short()
    first, idle, zone, changed = result["passes"]
    # The first sync decides every object, a tick with nothing changed none; room changing
    # on every cluster decides none again (room is no input of a placement) and the
    # rebalancer plans moves; no write is proposed.
    assert (first["kept"], idle["kept"], changed["kept"]) == (300, 0, 0), result["passes"]
    assert result["writes_proposed"] == 0
    assert changed["moves"] > 0, changed
    # A refresh that changed one zone's reading decides again only the policies that can
    # place there, each once.
    reach = sum(1 for zones in reevaluate.reachable() if reevaluate.CHANGED_ZONE in zones)
    assert 0 < zone["decided"] == reach < 300, zone
    assert idle["cpu_seconds"] <= 0.05, idle


@pytest.mark.timeout(300)
@pytest.mark.usefixtures("wrk")
def test_the_admission_benchmark_runs_short(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    tables = unrecorded(monkeypatch, tmp_path)
    results = admission.main(seconds=1)
    for run in ("echo", "mutate", "mutate_half_load", "mutate_fresh"):
        assert results[run]["rps"] > 0, (run, results[run])  # type: ignore[index]
    assert (tmp_path / "admission.json").exists()
    assert tables == ["admission"]


@pytest.mark.timeout(300)
@pytest.mark.usefixtures("wrk")
def test_the_score_benchmark_runs_short(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    tables = unrecorded(monkeypatch, tmp_path)
    rows = score.main(seconds=1)
    assert [r["clusters"] for r in rows] == list(score.SIZES)
    assert all(r["rps"] > 0 and r["handler_p99_ms"] > 0 for r in rows), rows
    assert tables == ["score"]


@pytest.mark.timeout(300)
@pytest.mark.usefixtures("wrk")
def test_the_soak_runs_short(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    tables = unrecorded(monkeypatch, tmp_path)
    monkeypatch.setattr(soak, "TOP_SECONDS", 1)
    results = soak.main(seconds=1, minutes=2)
    assert len(results["samples"]) == 2, results
    assert (tmp_path / "soak.png").exists()
    assert tables == ["soak"]
