"""Kubernetes objects and stored records are read through the typed views
(:mod:`webhook.model.objects`: ``meta_of``, ``dig``, ``mapping``, ``items``, ``strings``;
:mod:`webhook.decision.karmada.view`; :class:`webhook.decision.record.Record`), not by
hand-walking dicts.

Three checks over ``webhook/``: no ``(obj.get("metadata") or {}).get(...)``-style walk of
an object's metadata, spec or status at all; every ``or {}`` / ``or []`` default that is
left says why on its own line (``# untyped: <reason>``: an input check that validates
types on purpose, say); and there are no more of those than :data:`CEILING`."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "webhook"
WALK = re.compile(r"""\.get\(["'](metadata|spec|status)["']\)\s*or\s*[{\[]""")
DEFAULT = re.compile(r"\bor (\{\}|\[\])")
MARK = re.compile(r"#\s*untyped:\s*\S")
"""The comment a kept ``or {}`` / ``or []`` carries on its line: ``# untyped: <reason>``."""
CEILING = 6
"""Marked ``or {}`` / ``or []`` lines left in webhook/ (fewer than 20): lower it as they
go, never raise it."""


def _lines() -> list[tuple[str, int, str]]:
    return [
        (str(path.relative_to(ROOT.parent)), number, line)
        for path in sorted(ROOT.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
    ]


def test_no_hand_walk_of_an_objects_metadata_spec_or_status() -> None:
    found = [f"{p}:{n}: {line.strip()}" for p, n, line in _lines() if WALK.search(line)]
    assert not found, "read them with webhook.model.objects (meta_of, dig, mapping):\n" + "\n".join(
        found
    )


def test_every_untyped_default_says_why() -> None:
    found = [
        f"{p}:{n}: {line.strip()}"
        for p, n, line in _lines()
        if DEFAULT.search(line) and not MARK.search(line)
    ]
    assert not found, (
        "read it through webhook.model.objects (meta_of, dig, mapping, items, strings) or "
        "mark it `# untyped: <reason>` on the same line:\n" + "\n".join(found)
    )


def test_untyped_defaults_do_not_grow() -> None:
    found = [f"{p}:{n}" for p, n, line in _lines() if DEFAULT.search(line)]
    assert CEILING < 20
    assert len(found) <= CEILING, (
        f"{len(found)} 'or {{}}' / 'or []' defaults in webhook/ (at most {CEILING}): read "
        "objects through webhook.model.objects or a typed view instead:\n" + "\n".join(found)
    )
