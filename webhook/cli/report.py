"""``carbonshift report``: read the accounting from the API server and show it.

Reads the leader's ``carbonshift-accounting`` ConfigMap (totals per managed object and
cluster, hourly fleet points), carbonshift's Events and the managed objects' decision
annotations (the decision history); with ``--prometheus URL`` the per-workload figures
are what the counters rose by over ``--since`` instead. ``--input FILE`` reads the same
data from a JSON file (``{"ledger": {...ConfigMap data...}, "events": [...],
"objects": [...]}``) instead of a cluster.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import sys
from pathlib import Path
from typing import Any

import orjson

from webhook.model.errors import UsageError
from webhook.runtime.tasks import closed


def add_parser(subparsers: Any) -> None:
    """Register ``report`` (handler :func:`run`)."""
    p = subparsers.add_parser(
        "report",
        help="show the carbon accounting: energy, emissions, counterfactual, avoided",
        description="Per workload and per cluster: energy, intensity, emissions, the "
        "counterfactual (the same replicas placed as the user's own policy would have "
        "placed them), avoided emissions, share saved and moves, and the decision history "
        "(carbonshift's Events and the switches in decision annotations). -o html prints "
        "one self-contained HTML page with plots to stdout.",
    )
    p.add_argument("--since", default="7d", help="window of the history, plots and "
                   "Prometheus figures: 7d, 24h, 30m (default: %(default)s)")  # fmt: skip
    p.add_argument("-o", "--output", choices=("table", "json", "html"), default="table")
    p.add_argument("--kubeconfig", metavar="FILE", help="API server to read from "
                   "(default: KUBECONFIG, else in-cluster)")  # fmt: skip
    p.add_argument("--namespace", metavar="NS", help="namespace of the accounting ConfigMap "
                   "(default: POD_NAMESPACE, else the config's service.namespace)")  # fmt: skip
    p.add_argument("--configmap", default="carbonshift-accounting", metavar="NAME",
                   help="name of the accounting ConfigMap (default: %(default)s)")  # fmt: skip
    p.add_argument("--config", metavar="FILE", help="YAML config (for service.namespace)")
    p.add_argument("--prometheus", metavar="URL", help="take the per-workload figures over "
                   "--since from this Prometheus (its /api/v1/query)")  # fmt: skip
    p.add_argument("--input", metavar="FILE", help="read the data from this JSON file "
                   "instead of an API server")  # fmt: skip
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from webhook.report import data, render  # noqa: PLC0415 - keeps `carbonshift --help` fast

    try:
        since = data.duration(args.since)
    except ValueError as exc:
        raise UsageError(f"--since: {exc}") from None
    if args.input:
        try:
            doc = orjson.loads(Path(args.input).read_bytes())
        except (OSError, orjson.JSONDecodeError) as exc:
            raise UsageError(f"--input: cannot read {args.input}: {exc}") from None
        ledger, events, objects = (
            doc.get("ledger"),
            doc.get("events") or [],
            doc.get("objects") or [],
        )
    else:
        ledger, events, objects = asyncio.run(_from_cluster(args))
    now = datetime.datetime.now(datetime.UTC)
    report = data.build(ledger, events, objects, now=now, since=since)
    if args.prometheus:
        from webhook.report import prometheus  # noqa: PLC0415

        data.overlay(report, asyncio.run(prometheus.increases(args.prometheus, since)))
    out = {"table": render.table, "json": render.to_json, "html": render.page}[args.output]
    sys.stdout.write(out(report))
    return 0


async def _from_cluster(args: argparse.Namespace) -> tuple[Any, list[Any], list[Any]]:
    from webhook.kube.client import connect, settings  # noqa: PLC0415
    from webhook.model.config import load  # noqa: PLC0415
    from webhook.report import fetch  # noqa: PLC0415

    config = load(args.config)
    where = settings(args.kubeconfig, namespace=args.namespace,
                     default_namespace=config.service.namespace)  # fmt: skip
    if where is None:
        raise UsageError("no cluster: pass --kubeconfig, set KUBECONFIG, or use --input FILE")
    api = await connect(where)
    try:
        return await fetch.everything(api, where.namespace, args.configmap)
    finally:
        await closed(api.close())
