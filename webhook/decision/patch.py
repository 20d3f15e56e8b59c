"""Turn decided changes into an RFC 6902 JSON Patch against the object as received."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from webhook.decision.outcome import REMOVE, Change, Path


def pointer(path: Path) -> str:
    """JSON Pointer for ``path`` (``~`` -> ``~0``, ``/`` -> ``~1``)."""
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in path)


def build(obj: Mapping[str, Any], changes: Iterable[Change]) -> list[dict[str, Any]]:
    """Minimal ``add``/``remove`` operations that apply ``changes`` to ``obj``.

    Missing parents are created by adding the nested value at the first missing level.
    ``obj`` is not modified: a copy-on-write view tracks what earlier operations added.
    """
    root: dict[str, Any] = dict(obj)
    ops: list[dict[str, Any]] = []
    for change in changes:
        node = root
        for depth, key in enumerate(change.path[:-1]):
            child = node.get(key)
            if not isinstance(child, dict):
                if change.value is not REMOVE:
                    nested = _nest(change.path[depth + 1 :], change.value)
                    node[key] = nested
                    ops.append(
                        {"op": "add", "path": pointer(change.path[: depth + 1]), "value": nested}
                    )
                break
            node[key] = child = dict(child)
            node = child
        else:
            leaf = change.path[-1]
            if change.value is REMOVE:
                if leaf in node:
                    del node[leaf]
                    ops.append({"op": "remove", "path": pointer(change.path)})
            elif node.get(leaf, REMOVE) != change.value:
                node[leaf] = change.value
                ops.append({"op": "add", "path": pointer(change.path), "value": change.value})
    return ops


def _nest(path: Path, value: Any) -> Any:
    for key in reversed(path):
        value = {key: value}
    return value
