"""``carbonshift explain KIND/NAME [-n NS]``: why a live object looks the way it does.

Reads, from the API server of ``--kubeconfig`` (else ``KUBECONFIG``, else in-cluster),
the object and its decision record (``carbonshift.io/decision`` and its line,
``carbonshift.io/reason``), carbonshift's Events about it and the fleet (Karmada
Clusters, Liqo's virtual nodes), and prints:

- where it is placed and why (the record's line, the ordered fill's tiers or the weights);
- each cluster as the record weighed it: zone, intensity at the decision, tier or weight,
  excluded or not, beside what the fleet says now (its intensity mark and class, and the
  room its ``status.resourceSummary`` leaves);
- what would change it next and when: the dwell of the placement in force
  (``hysteresis.dwell_hours``), the margin a new placement must beat (``hysteresis.margin``),
  the leader's minimum interval between writes (``reevaluate.min_interval_seconds``), a
  NodePool's pause and its end at ``max-pause`` (the rules of
  :mod:`webhook.decision.follow` and :mod:`webhook.decision.hysteresis`);
- who owns each field carbonshift wrote (the record's ``own``): carbonshift while the
  field is as it wrote it, else the user, and the fields users took back (``user``);
- the Events and the last switches.

Also a kubectl plugin: the ``kubectl-carbonshift`` entry point makes
``kubectl carbonshift explain pp/web -n shop`` work. Read-only.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import difflib
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TextIO

import orjson

from webhook.model.config import Config, load
from webhook.model.errors import UsageError
from webhook.model.objects import meta_of
from webhook.model.vocabulary import DECISION

if TYPE_CHECKING:
    from webhook.kinds import Kind

SHORT_NAMES: Mapping[str, str] = {
    "pp": "PropagationPolicy",
    "cpp": "ClusterPropagationPolicy",
    "nso": "NamespaceOffloading",
}
"""kubectl's short names of the handled kinds (Karmada's ``pp`` and ``cpp``), and ``nso``."""


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "explain",
        help="say why a live object is placed as it is, and what would change it next",
        description="Read KIND/NAME from the API server with its decision record "
        "(carbonshift.io/decision and carbonshift.io/reason), carbonshift's Events about it "
        "and the fleet (Karmada Clusters, Liqo virtual nodes), and print where it is placed "
        "and why, each cluster's intensity and room as recorded beside what the fleet says "
        "now, what would change it next and when (dwell end, minimum interval, hysteresis "
        "margin, a pause's end), and whether the user or carbonshift owns each field. "
        "KIND is propagationpolicy (pp), clusterpropagationpolicy (cpp), nodepool or "
        "namespaceoffloading (nso), in any case, singular or plural, with or without its "
        "API group. Read-only. Also a kubectl plugin: kubectl carbonshift explain pp/web -n "
        "shop. Exit status 0, 1 when the object is not there or carbonshift does not manage "
        "it or the API server does not answer, 2 for bad usage.",
    )
    p.add_argument(
        "target", metavar="KIND/NAME", help="the object, e.g. pp/web or nodepool/default"
    )
    p.add_argument(
        "-n", "--namespace", metavar="NS",
        help="namespace of a namespaced kind (default: default); refused for cluster-scoped kinds",
    )  # fmt: skip
    p.add_argument("--kubeconfig", metavar="FILE", help="API server to read from "
                   "(default: KUBECONFIG, else in-cluster)")  # fmt: skip
    p.add_argument(
        "--config", metavar="FILE",
        help="YAML config whose hysteresis: and reevaluate: the leader runs with (default: "
        "built-in), for what would change the object next",
    )  # fmt: skip
    p.add_argument("-o", "--output", choices=("text", "json"), default="text",
                   help="output format (default: %(default)s)")  # fmt: skip
    p.set_defaults(handler=run)


# --- the target -------------------------------------------------------------------------------


def kind_of(text: str) -> Kind:
    """The handled kind ``text`` names (``pp``, ``PropagationPolicy``,
    ``propagationpolicies.policy.karmada.io``...); a usage error naming the closest."""
    from webhook import kinds  # noqa: PLC0415 - keeps `carbonshift --help` fast

    names: dict[str, Kind] = {}
    for row in kinds.REGISTRY:
        singular = row.kind.lower()
        for name in (
            singular,
            row.resource,
            f"{singular}.{row.group}",
            f"{row.resource}.{row.group}",
        ):
            names[name] = row
    for short, kind in SHORT_NAMES.items():
        names[short] = next(r for r in kinds.REGISTRY if r.kind == kind)
    found = names.get(text.lower())
    if found is not None:
        return found
    handled = ", ".join(sorted(r.kind.lower() for r in kinds.REGISTRY))
    closest = difflib.get_close_matches(text.lower(), list(names), n=1)
    hint = f"did you mean {closest[0]}? " if closest else ""
    raise UsageError(f"explain: kind {text!r} is not handled; {hint}(handled: {handled})")


def target(text: str, namespace: str | None) -> tuple[Kind, str, str | None]:
    """``KIND/NAME`` and ``-n`` read: the kind's row, the name, the namespace (None for a
    cluster-scoped kind)."""
    kind, slash, name = text.partition("/")
    if not slash or not kind or not name or "/" in name:
        raise UsageError(f"explain: expected KIND/NAME such as pp/web, got {text!r}")
    row = kind_of(kind)
    if not row.namespaced:
        if namespace is not None:
            raise UsageError(f"explain: {row.kind} is cluster-scoped: drop -n {namespace}")
        return row, name, None
    return row, name, namespace or "default"


# --- the command ------------------------------------------------------------------------------


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``carbonshift explain``; returns the exit status."""
    from webhook.cli.explained import explain, render  # noqa: PLC0415 - keeps --help fast
    from webhook.kube.reads import ClusterUnreachable  # noqa: PLC0415

    out, err = out or sys.stdout, err or sys.stderr
    row, name, namespace = target(args.target, args.namespace)
    config = load(args.config)
    shown = f"{row.kind} {namespace}/{name}" if namespace else f"{row.kind} {name}"
    try:
        obj, events, clusters, nodes = asyncio.run(_read(args, config, row, name, namespace))
    except ClusterUnreachable as exc:
        err.write(f"carbonshift explain: {exc}\n")
        return 1
    if obj is None:
        err.write(
            f"carbonshift explain: {shown}: not found among the objects carbonshift manages "
            f"(none of that name carries {DECISION})\n"
        )
        return 1
    now = datetime.datetime.now(datetime.UTC)
    doc = explain(obj, row, events=events, clusters=clusters, nodes=nodes, config=config, now=now)
    if args.output == "json":
        out.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        out.write(render(doc))
    return 0


async def _read(
    args: argparse.Namespace, config: Config, row: Kind, name: str, namespace: str | None
) -> tuple[dict[str, Any] | None, list[Any], list[Any], list[Any]]:
    """The managed object (None: none of that name), carbonshift's Events, the Karmada
    Clusters and Liqo's virtual nodes."""
    from webhook.integrations import EVENT_REASONS  # noqa: PLC0415
    from webhook.kube import reads  # noqa: PLC0415 - only with a cluster
    from webhook.kube.client import connect, settings  # noqa: PLC0415
    from webhook.runtime.tasks import closed  # noqa: PLC0415

    flag = "--kubeconfig" if args.kubeconfig else "KUBECONFIG"
    kube = settings(args.kubeconfig, default_namespace=config.service.namespace)
    if kube is None:
        raise UsageError("explain: no cluster: pass --kubeconfig or set KUBECONFIG")
    api = await connect(kube, flag)
    try:
        _, events, objects = await reads.collect(
            api, config.accounting.configmap, kube.namespace, kube.namespace, EVENT_REASONS
        )
        try:
            (clusters, nodes, _), _missing = await reads.fleet(api)
        except Exception as exc:  # an ApiException or a network error: one line, exit 1
            raise reads.unreachable(api, exc) from None
    finally:
        await closed(api.close())
    found = None
    for obj in objects:
        meta = meta_of(obj)
        if (
            obj.get("kind") == row.kind
            and meta.name == name
            and (meta.namespace or None) == namespace
        ):
            found = obj
    return found, events, clusters, nodes
