"""Write the webhook rules and the ClusterRole rules from the kind registry.

The mutating webhook registration's ``rules:`` and the ClusterRole's ``rules:`` follow from
the handled kinds (:data:`webhook.kinds.REGISTRY`: each kind's group, version, resource,
scope and operations, and its :class:`~webhook.kinds.Grant`\\ s) and the fleet's grants
(:func:`webhook.integrations.grants`). They are written between markers into the kustomize
base and the chart's templates, the same text in both::

      # BEGIN generated <block> (make generate writes it from webhook/kinds)
      ...
      # END generated <block>

Everything around a block (the namespace and object selectors, the chart's templating,
the Role) stays as written. The blocks: ``namespaced-rules`` and ``cluster-rules`` (the
webhooks of the Namespaced kinds, opted in per namespace, and of the cluster-scoped
kinds, opted in per object) and ``cluster-role`` (every rule under its reasons).

    python -m devtools.manifests          # rewrite the blocks (make generate)
    python -m devtools.manifests --check  # exit 1 when a block is out of date
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path

from webhook import integrations, kinds

ROOT = Path(__file__).resolve().parents[1]
COMMAND = "make generate"
WEBHOOKS = (
    ROOT / "manifests" / "base" / "webhook.yaml",
    ROOT / "charts" / "carbonshift" / "templates" / "webhook.yaml",
)
RBAC = (
    ROOT / "manifests" / "base" / "rbac.yaml",
    ROOT / "charts" / "carbonshift" / "templates" / "rbac.yaml",
)
FILES = (*WEBHOOKS, *RBAC)
WIDTH = 96
"""Comment lines are wrapped to this width (indentation included)."""
BEGIN = re.compile(r"^(?P<indent> *)# BEGIN generated (?P<block>[a-z-]+)\b.*$")
SOURCE = "(make generate writes it from webhook/kinds)"


def _flow(values: tuple[str, ...]) -> str:
    return "[" + ", ".join(v if v else '""' for v in values) + "]"


def _comment(text: str, indent: str) -> list[str]:
    text = text[:1].upper() + text[1:]
    if not text.endswith("."):
        text += "."
    return textwrap.wrap(
        text,
        WIDTH,
        initial_indent=f"{indent}# ",
        subsequent_indent=f"{indent}# ",
        break_on_hyphens=False,
        break_long_words=False,
    )


def webhook_rules(registry: kinds.Registry, *, namespaced: bool, indent: str) -> list[str]:
    """The ``rules:`` entries of the webhook of the Namespaced kinds, or of the
    cluster-scoped ones, in registry order."""
    lines = []
    for k in registry:
        if k.namespaced is not namespaced:
            continue
        lines += [
            f"{indent}# {k.kind}",
            f"{indent}- apiGroups: {_flow((k.group,))}",
            f"{indent}  apiVersions: {_flow((k.version,))}",
            f"{indent}  resources: {_flow((k.resource,))}",
            f"{indent}  operations: {_flow(k.operations)}",
            f"{indent}  scope: {'Namespaced' if namespaced else 'Cluster'}",
        ]
    return lines


def cluster_role(registry: kinds.Registry, *, indent: str) -> list[str]:
    """The ClusterRole's ``rules:`` entries, each under its reasons."""
    lines = []
    for rule in integrations.cluster_role(registry):
        for why in rule.whys:
            lines += _comment(why, indent)
        lines += [
            f"{indent}- apiGroups: {_flow((rule.group,))}",
            f"{indent}  resources: {_flow(rule.resources)}",
            f"{indent}  verbs: {_flow(rule.verbs)}",
        ]
    return lines


Block = Callable[[kinds.Registry, str], list[str]]
BLOCKS: Mapping[str, Block] = {
    "namespaced-rules": lambda r, i: webhook_rules(r, namespaced=True, indent=i),
    "cluster-rules": lambda r, i: webhook_rules(r, namespaced=False, indent=i),
    "cluster-role": lambda r, i: cluster_role(r, indent=i),
}


class MarkerError(ValueError):
    """A file's markers are missing, unknown or unbalanced."""


def render(text: str, registry: kinds.Registry | None = None) -> str:
    """``text`` with every generated block written afresh from ``registry`` (the
    registry of the kinds by default)."""
    registry = kinds.REGISTRY if registry is None else registry
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        found = BEGIN.match(line)
        if found is None:
            out.append(line)
            continue
        indent, block = found["indent"], found["block"]
        if block not in BLOCKS:
            raise MarkerError(f"unknown generated block {block!r}")
        end = f"{indent}# END generated {block}"
        try:
            close = lines.index(end, i)
        except ValueError:
            raise MarkerError(f"no {end.strip()!r} after {line.strip()!r}") from None
        out += [f"{indent}# BEGIN generated {block} {SOURCE}", *BLOCKS[block](registry, indent)]
        out.append(end)
        i = close + 1
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def blocks(text: str) -> list[str]:
    """The generated blocks ``text`` holds, in order."""
    return [m["block"] for m in map(BEGIN.match, text.splitlines()) if m]


def stale(files: tuple[Path, ...] = FILES) -> list[Path]:
    """The files whose generated blocks differ from the registry's."""
    return [f for f in files if render(f.read_text()) != f.read_text()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.manifests", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 when a file is stale")
    args = parser.parse_args(argv)
    if args.check:
        out_of_date = stale()
        for path in out_of_date:
            print(f"{path.relative_to(ROOT)} is out of date: run {COMMAND}", file=sys.stderr)
        return 1 if out_of_date else 0
    for path in FILES:
        text = path.read_text()
        fresh = render(text)
        if fresh != text:
            path.write_text(fresh)
            print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
