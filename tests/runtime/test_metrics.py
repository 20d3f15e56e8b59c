"""Every Prometheus metric carbonshift exports is listed in docs/cli.md, the kinds' own
gauges included."""

from __future__ import annotations

import re
from pathlib import Path

from webhook import kinds

ROOT = Path(__file__).resolve().parents[2]


def test_the_docs_list_every_metric() -> None:
    names = set(
        re.findall(r'"(carbonshift_[a-z_]+)"', (ROOT / "webhook/runtime/metrics.py").read_text())
    )
    names |= {k.following.tally.name for k in kinds.REGISTRY if k.following and k.following.tally}
    listed = (ROOT / "docs" / "cli.md").read_text()
    assert names
    assert sorted(n for n in names if n not in listed) == []
