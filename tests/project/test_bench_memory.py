"""The re-evaluation benchmark's memory figure is the measuring process's own: its passes
run in a process started by fork and exec, where ``getrusage``'s ``ru_maxrss`` still
carries the parent's peak (Linux folds the replaced memory's high-water mark into it at
exec), so bench/reevaluate.py reads ``VmHWM`` instead."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.reevaluate import _rss_mb

ROOT = Path(__file__).resolve().parents[2]
HELD_MB = 256
CHILD = (
    "import json, resource; from bench.reevaluate import _rss_mb; "
    "print(json.dumps([_rss_mb('VmHWM'), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss]))"
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.timeout(60)
def test_the_peak_is_the_measured_process_not_its_parent() -> None:
    held = bytearray(HELD_MB * 1024 * 1024)
    held[::4096] = b"\1" * len(range(0, len(held), 4096))  # resident, page by page
    parent = _rss_mb("VmRSS")
    assert parent >= HELD_MB
    answer = subprocess.run(
        [sys.executable, "-c", CHILD], cwd=ROOT, capture_output=True, text=True, check=True,
        timeout=50,
    )  # fmt: skip
    del held
    peak, maxrss_kb = json.loads(answer.stdout)
    assert maxrss_kb / 1024 >= parent - 1  # what ru_maxrss would have reported
    assert peak < parent - HELD_MB / 2, (peak, parent)  # the child's own peak
