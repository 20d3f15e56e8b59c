"""The semantic check of one object: admitted by the webhook's own code on the fixed
fleet (``tests/semantics/fleet.py``), what it stores must pass the checker."""

from __future__ import annotations

from typing import Any

from tests.semantics import checker, fleet

WORLD = fleet.world()


def assert_holds(obj: dict[str, Any]) -> None:
    stored, warnings = fleet.run(obj)
    violations = checker.check(obj, stored, warnings, WORLD)
    assert not violations, "\n".join(
        [*map(str, violations), f"user: {obj}", f"stored: {stored}", f"warnings: {warnings}"]
    )
