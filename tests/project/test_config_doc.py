"""docs/configuration.md names only keys the code has, and gives each scalar key the
default the code has."""

from __future__ import annotations

import re
from pathlib import Path

from webhook.model.config import Config

ROOT = Path(__file__).resolve().parents[2]
ROW = re.compile(r"^\| `([a-z_.]+)` \| `([^`]+)` \|", re.MULTILINE)


def _same(documented: str, value: object) -> bool:
    if str(value).lower() == documented.lower():
        return True
    try:
        return float(documented) == float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False


def test_documented_defaults_are_the_codes() -> None:
    config, checked, wrong = Config(), 0, []
    for key, documented in ROW.findall((ROOT / "docs" / "configuration.md").read_text()):
        value: object = config
        try:
            for part in key.split("."):
                value = getattr(value, part)
        except AttributeError:  # placeholders (clusters.<name>...) do not match ROW
            wrong.append(f"{key}: documented, but Config has no such key")
            continue
        if isinstance(value, bool | int | float | str):
            checked += 1
            if not _same(documented, value):
                wrong.append(f"{key}: documented {documented}, code {value}")
    assert checked >= 10
    assert wrong == []
