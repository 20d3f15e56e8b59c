"""promtool (built by hack/build-prometheus.sh) for the rules' and the dashboard's tests:
:func:`run` runs it, skipping the test when it is not built, except under CI=true, where a
missing promtool fails."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("CARBONSHIFT_CACHE") or ROOT / ".cache" / "bin")
PROMTOOL = CACHE / "promtool"


def promtool() -> Path:
    if PROMTOOL.exists():
        return PROMTOOL
    if os.environ.get("CI") == "true":
        pytest.fail(f"{PROMTOOL} is missing: run hack/build-prometheus.sh promtool")
    pytest.skip("promtool is not built (hack/build-prometheus.sh promtool)")


def run(*args: str, cwd: Path = ROOT) -> str:
    """``promtool *args`` in ``cwd``; its output, asserting it succeeded."""
    done = subprocess.run(
        [str(promtool()), *args], cwd=cwd, capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr
