"""The leader's benchmark runs in CI in its short mode, so it cannot break unseen: the
first sync decides every object, a tick with nothing changed decides none, and room
changing on every cluster decides none of them again (room is no input of a
placement) and the rebalancer plans moves, with no write
proposed (the figures themselves are `make bench`'s, on an idle machine)."""

from __future__ import annotations

import pytest

from bench import reevaluate


@pytest.mark.timeout(600)
def test_the_leaders_benchmark_runs_in_its_short_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("POLICIES", "CLUSTERS", "TARGET_CPU_SECONDS", "TARGET_RSS_MB"):
        monkeypatch.setattr(reevaluate, name, getattr(reevaluate, name))  # restored after
    result = reevaluate.short()
    first, idle, changed = result["passes"]
    assert (first["kept"], idle["kept"], changed["kept"]) == (300, 0, 0), result["passes"]
    assert result["writes_proposed"] == 0
    assert changed["moves"] > 0, changed
    assert idle["cpu_seconds"] <= 0.05, idle
