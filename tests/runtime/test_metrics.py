"""Every Prometheus metric carbonshift exports is listed in the README."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_lists_every_metric() -> None:
    names = set(
        re.findall(r'"(carbonshift_[a-z_]+)"', (ROOT / "webhook/runtime/metrics.py").read_text())
    )
    readme = (ROOT / "README.md").read_text()
    assert names
    assert sorted(n for n in names if n not in readme) == []
