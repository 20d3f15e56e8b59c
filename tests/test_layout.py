"""Imports point one way: the decision core at the bottom, the edges at the top.

Checked from the source (``ast``), so a new import that breaks the layout fails here
rather than in review. The README's "Architecture" section draws the same picture.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "webhook"

LEAVES = {
    "webhook",
    "webhook.errors",
    "webhook.intensity",
    "webhook.validation",
    "webhook.vocabulary",
}
"""Modules everything may import; they import nothing of carbonshift but each other."""
CORE = LEAVES | {"webhook.config", "webhook.regions", "webhook.providers.registry"}
"""What the pure decision core may read besides itself (config is plain data)."""
IO_LIBRARIES = {"aiohttp", "asyncio", "aiocache", "redis", "kubernetes_asyncio", "socket"}
RULES: dict[str, tuple[set[str], set[str]]] = {
    # package: (allowed carbonshift prefixes besides itself, forbidden third-party roots)
    "webhook.decision": (CORE, IO_LIBRARIES | {"structlog", "time"}),
    "webhook.providers": (
        LEAVES | {"webhook.metrics"},
        {"kubernetes_asyncio"},
    ),
    "webhook.simulate": (
        CORE | {"webhook.decision", "webhook.traces", "webhook.kinds"},
        {"aiohttp", "kubernetes_asyncio"},
    ),
}


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Modules imported at run time (``if TYPE_CHECKING:`` blocks are for the type checker)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            node.body = []
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def _within(name: str, prefixes: set[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


@pytest.mark.parametrize("package", sorted(RULES))
def test_imports_point_down(package: str) -> None:
    allowed, forbidden = RULES[package]
    folder = PACKAGE / package.split(".", 1)[1]
    problems = []
    for path in sorted(folder.glob("*.py")):
        for name in _imports(path):
            if name.startswith("webhook"):
                ok = (
                    _within(name, {package})
                    or name in allowed
                    or _within(name, allowed - {"webhook"})
                )
            else:
                ok = name.split(".")[0] not in forbidden
            if not ok:
                problems.append(f"{_module(path)} imports {name}")
    assert problems == []


def test_leaves_import_only_leaves() -> None:
    for name in ("errors", "intensity", "validation", "vocabulary"):
        imported = {i for i in _imports(PACKAGE / f"{name}.py") if i.startswith("webhook")}
        assert imported <= LEAVES, name
