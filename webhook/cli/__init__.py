"""The ``carbonshift`` command line.

Exit codes: 0 success, 1 runtime failure, 2 bad usage or bad configuration.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import ipaddress
import math
import os
import re
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import orjson
import structlog
import yaml

from webhook import __version__
from webhook.cli import explain as cli_explain
from webhook.cli import intensity as cli_intensity
from webhook.cli import simulate as simulate_cli
from webhook.model.config import Config, error_line, load
from webhook.model.errors import UsageError
from webhook.model.objects import EMPTY
from webhook.model.objects import items as dig_items
from webhook.model.validation import InvalidInput, yaml_reason
from webhook.report.inputs import InputProblem, check_ledger
from webhook.runtime import logs
from webhook.serve import certs

if TYPE_CHECKING:
    from webhook.kube.client import Settings

Handler = Callable[[argparse.Namespace], int]


PIPE_CLOSED = 128 + signal.SIGPIPE
"""Exit status when the reader of stdout went away (``carbonshift ... | head``)."""


def _config(args: argparse.Namespace) -> Config:
    return load(args.config)


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors on one line (``carbonshift serve: argument --port: ...``)
    instead of the usage block followed by the error."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _port(text: str) -> int:
    """An argparse type: a TCP port, 1 to 65535."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port 1-65535, got {text!r}") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port 1-65535, got {port}")
    return port


def _seconds(*, positive: bool) -> Callable[[str], float]:
    """An argparse type: a finite number of seconds, > 0 (``positive``) or >= 0."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < 0 or (positive and value == 0):
            bound = "> 0" if positive else ">= 0"
            raise argparse.ArgumentTypeError(f"expected seconds {bound}, got {text!r}")
        return value

    return parse


def _host(text: str) -> str:
    """An argparse type: an IP address or a DNS name to bind (``999.1.1.1`` is neither)."""
    try:
        ipaddress.ip_address(text)
    except ValueError:
        problem = certs.dns_problem(text)
        if problem is not None:
            raise argparse.ArgumentTypeError(
                f"{text!r} is neither an IP address nor a host name: {problem}"
            ) from None
    return text


async def _check_kube(where: Settings, flag: str) -> None:
    """Load the kubeconfig (nothing is sent): a bad one is a one-line usage error."""
    from webhook.kube.client import connect  # noqa: PLC0415 - only with a cluster
    from webhook.runtime.tasks import closed  # noqa: PLC0415

    api = await connect(where, flag)
    await closed(api.close())


def _kubeconfig_flag(given: str | None) -> str:
    return "--kubeconfig" if given else "KUBECONFIG"


# --- serve ------------------------------------------------------------------------------


def _serve(args: argparse.Namespace) -> int:
    from webhook import app  # noqa: PLC0415 - keeps `carbonshift --help` fast
    from webhook.kube.client import settings  # noqa: PLC0415
    from webhook.model.errors import ListenError  # noqa: PLC0415
    from webhook.serve import tls  # noqa: PLC0415

    config = _config(args)
    kube = settings(
        args.kubeconfig,
        namespace=args.lease_namespace,
        default_namespace=config.service.namespace,
        lease=args.lease_name,
    )
    if kube is not None:
        asyncio.run(_check_kube(kube, _kubeconfig_flag(args.kubeconfig)))
    cert_dir = Path(args.cert_dir)
    hosts = ["localhost", "127.0.0.1", *config.service.dns_names(), args.host]
    created = certs.serving_dir(cert_dir, hosts)  # never replaces a file already there
    problem = tls.pair_problem(cert_dir / certs.TLS_CERT, cert_dir / certs.TLS_KEY)
    if problem is not None:
        raise UsageError(f"--cert-dir {cert_dir}: {problem}")
    logs.configure(args.log_level)
    if created:
        structlog.get_logger("carbonshift.server").info(
            "development_certificates_created",
            directory=str(cert_dir),
            ca=str(cert_dir / certs.CA_CERT),
            hint="trust ca.crt (caBundle) in the webhook configuration",
        )
    try:
        import uvloop  # noqa: PLC0415 - optional speed-up

        runner: Callable[[Any], Any] = uvloop.run
    except ImportError:
        runner = asyncio.run
    try:
        runner(
            app.run(
                config,
                host=args.host,
                port=args.port,
                cert_dir=cert_dir,
                cert_reload_seconds=args.cert_reload_seconds,
                shutdown_seconds=args.shutdown_seconds,
                kube=kube,
            )
        )
    except ListenError as exc:  # a runtime failure, not a usage error
        print(f"carbonshift: {exc}", file=sys.stderr)
        return 1
    return 0


def _add_serve(sub: Any) -> None:
    p = sub.add_parser(
        "serve",
        help="run the HTTPS webhook and scheduler API",
        description="Serve POST /mutate (AdmissionReview), GET /healthz, /readyz and /metrics "
        "over HTTPS. When --cert-dir is empty or absent a development CA and serving "
        "certificate are created there; a directory with files but without tls.crt or "
        "tls.key is refused (nothing in it is replaced); certificate files are re-read "
        "when they change.",
    )
    p.add_argument("--config", metavar="FILE", help="YAML config (default: built-in, static data)")
    p.add_argument("--host", default="0.0.0.0", type=_host,  # noqa: S104
                   help="address to bind (default: %(default)s)")  # fmt: skip
    p.add_argument(
        "--port", type=_port, default=8443, help="HTTPS port, 1-65535 (default: %(default)s)"
    )
    p.add_argument(
        "--cert-dir",
        default="certs",
        metavar="DIR",
        help="directory with tls.crt and tls.key; empty or absent: a development CA and "
        "certificate are created there (default: %(default)s)",
    )
    p.add_argument(
        "--cert-reload-seconds",
        type=_seconds(positive=True),
        default=10.0,
        metavar="S",
        help="how often to check the certificate files for changes (default: %(default)s)",
    )
    p.add_argument(
        "--shutdown-seconds",
        type=_seconds(positive=False),
        default=10.0,
        metavar="S",
        help="on SIGTERM, how long requests in progress may take to finish; keep it (plus "
        "any preStop sleep) below the pod's terminationGracePeriodSeconds "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--log-level",
        default="info",
        choices=("debug", "info", "warning", "error"),
        help="log level (default: %(default)s)",
    )
    p.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="read the fleet (Karmada Clusters) from this API server (default: KUBECONFIG, "
        "else the in-cluster service account, else no cluster: serve without one)",
    )
    p.add_argument(
        "--lease-namespace",
        metavar="NS",
        help="namespace of the leader Lease (default: POD_NAMESPACE, the service account's "
        "namespace, else service.namespace of the config)",
    )
    p.add_argument(
        "--lease-name",
        default="carbonshift-leader",
        metavar="NAME",
        help="name of the leader Lease (default: %(default)s)",
    )
    p.set_defaults(handler=_serve)


# --- certs ------------------------------------------------------------------------------


def _certs(args: argparse.Namespace) -> int:
    out = Path(args.out)
    for flag, value in (("--service", args.service), ("--namespace", args.namespace)):
        if not certs.DNS_LABEL.fullmatch(value):
            raise UsageError(
                f"{flag} {value}: not a DNS label (1 to 63 lower-case letters, digits or "
                "hyphens, not at either end)"
            )
    certs.check_hosts(args.ip, args.dns)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: is a file, not a directory")
    existing = [out / name for name in certs.BUNDLE_FILES if (out / name).exists()]
    if existing and not args.force:
        raise UsageError(
            f"{existing[0]} exists: pass --force to replace the CA and certificate in {out} "
            "(every caBundle that trusts the old CA must then be updated)"
        )
    certs.writable_dir(out, "--out")
    hosts = certs.service_hosts(args.service, args.namespace, [*args.dns, *args.ip])
    bundle = certs.issue(hosts)
    try:
        bundle.write(out)
    except OSError as exc:
        reason = (exc.strerror or str(exc)).lower()
        raise UsageError(f"--out {out}: cannot write {exc.filename or out}: {reason}") from None
    print(bundle.ca_bundle)
    print(f"wrote {out}/ca.crt ca.key tls.crt tls.key for {', '.join(hosts)}", file=sys.stderr)
    return 0


def _add_certs(sub: Any) -> None:
    p = sub.add_parser(
        "certs",
        help="create a CA and serving certificate for the webhook Service",
        description="Write ca.crt, ca.key, tls.crt and tls.key to --out and print the base64 "
        "caBundle for the MutatingWebhookConfiguration on stdout. Files already in --out "
        "are not replaced without --force.",
    )
    p.add_argument("--service", required=True, help="Service name, e.g. carbonshift")
    p.add_argument("--namespace", required=True, help="Service namespace")
    p.add_argument("--ip", action="append", default=[],
                   help="extra IP SAN, IPv4 or IPv6 (repeatable)")  # fmt: skip
    p.add_argument("--dns", action="append", default=[],
                   help="extra DNS SAN, e.g. hook.example.com or *.example.com "
                   "(repeatable)")  # fmt: skip
    p.add_argument("--out", required=True, metavar="DIR",
                   help="directory to write to (created when absent)")  # fmt: skip
    p.add_argument(
        "--force",
        action="store_true",
        help="replace a CA or certificate already in --out (default: refuse)",
    )
    p.set_defaults(handler=_certs)


# --- mutate -----------------------------------------------------------------------------


_DOCUMENT_START = re.compile(r"^---[ \t]*(?:#.*)?$", re.MULTILINE)
MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
"""The files ``-f DIR`` reads, as ``kubectl apply -f DIR`` does."""


def manifest_files(path: str, *, recursive: bool) -> list[str]:
    """The files behind one ``-f`` argument: the file itself (``-`` is stdin), or every
    ``*.yaml``, ``*.yml`` and ``*.json`` file of a directory, sorted (with ``recursive``,
    of its subdirectories too), as kubectl reads them."""
    if path == "-" or not Path(path).is_dir():
        return [path]
    pattern = "**/*" if recursive else "*"
    found = sorted(
        str(p) for p in Path(path).glob(pattern) if p.suffix in MANIFEST_SUFFIXES and p.is_file()
    )
    if not found:
        deeper = "" if recursive else " (pass -R to read its subdirectories)"
        raise UsageError(f"{path}: no .yaml, .yml or .json files in this directory{deeper}")
    return found


def _read_documents(
    paths: Sequence[str], *, recursive: bool = False
) -> tuple[list[dict[str, Any]], list[str]]:
    """The objects in the manifest files or directories (multi-document YAML, JSON, or a
    List), and one problem per document that could not be read, naming it; the others are
    still read. Input with no object at all is a usage error."""
    objects: list[dict[str, Any]] = []
    problems: list[str] = []
    for path in paths:
        for name in manifest_files(path, recursive=recursive):
            _read_file(name, objects, problems)
    if not objects and not problems:
        shown = "stdin" if list(paths) == ["-"] else ", ".join(paths)
        raise UsageError(f"{shown} holds no objects: nothing to mutate")
    return objects, problems


def _read_file(path: str, objects: list[dict[str, Any]], problems: list[str]) -> None:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text("utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise UsageError(f"cannot read {path}: not UTF-8 text") from None
    starts = [0, *(m.end() for m in _DOCUMENT_START.finditer(text))]
    ends = [*(m.start() for m in _DOCUMENT_START.finditer(text)), len(text)]
    chunks = [(a, text[a:b]) for a, b in zip(starts, ends, strict=True) if text[a:b].strip()]
    for index, (offset, chunk) in enumerate(chunks, start=1):
        where = f"{path}: document {index}"
        try:
            doc = yaml.safe_load(chunk)
        except yaml.YAMLError as exc:
            reason = yaml_reason(exc, first_line=text.count("\n", 0, offset) + 1)
            problems.append(f"{where}: not valid YAML or JSON: {reason}; skipped")
            continue
        if doc is None:
            continue
        is_list = isinstance(doc, dict) and doc.get("kind") == "List"
        items = list(dig_items(doc, "items")) if is_list else [doc]
        for item_index, item in enumerate(items):
            name = f"{where}, item {item_index}" if is_list else where
            if not isinstance(item, dict) or "kind" not in item or "apiVersion" not in item:
                problems.append(f"{name}: needs apiVersion and kind; skipped")
                continue
            objects.append(item)


async def _preview(
    config: Config, docs: list[dict[str, Any]], *, again: bool, kubeconfig: str | None = None
) -> list[Any]:
    from webhook.app import build_feed  # noqa: PLC0415
    from webhook.cli import preview, preview_kueue  # noqa: PLC0415
    from webhook.decision.karmada.api import resolve  # noqa: PLC0415
    from webhook.kinds import Context  # noqa: PLC0415
    from webhook.kinds.reevaluation import Reevaluation  # noqa: PLC0415
    from webhook.model.intensity import utcnow  # noqa: PLC0415

    namespaces, read = await preview.cluster_namespaces(kubeconfig) if kubeconfig else (None, None)
    karmada = resolve(config.karmada.version, read)
    feed = build_feed(config)
    now = utcnow()
    kueue = preview_kueue.Offline(config, feed, docs, now)
    peers = preview.liqo_peers(config, docs).places.values()
    for zone in sorted(kueue.zones() | {z for p in peers if (z := p.grid_zone)}):
        feed.want(zone)  # a worker's zone its MultiKueueCluster names, a virtual node's
    try:
        await feed.refresh_once()
        ctx = Context(config=config, table=feed.table(), now=now, karmada=karmada)
        if again:
            rules = Reevaluation(config, feed.outlook, feed.spread)
            return preview.reevaluate(docs, ctx, rules, namespaces, kueue)
        return preview.preview(docs, ctx, namespaces, kueue)
    finally:
        await feed.stop()


def _mutate(args: argparse.Namespace) -> int:
    config = _config(args)
    docs, problems = _read_documents(args.filename, recursive=args.recursive)
    for problem in problems:
        sys.stderr.write(f"carbonshift: {problem}\n")
    from webhook.kube.reads import ClusterUnreachable  # noqa: PLC0415

    try:
        results = asyncio.run(
            _preview(config, docs, again=args.reevaluate, kubeconfig=args.kubeconfig)
        )
    except ClusterUnreachable as exc:  # a runtime failure, as report and explain say it
        print(f"carbonshift: {exc}", file=sys.stderr)
        return 1
    code = 1 if problems else 0
    from webhook.cli.preview import fill_lines, notes_and_warnings  # noqa: PLC0415

    names = set(config.clusters)
    if args.output == "json":
        payload = []
        for r in results:
            notes, warnings = notes_and_warnings(r, names)
            payload.append({
                "object": r.stored,
                "outcome": r.outcome.result,
                "reason": r.outcome.reason or None,
                "warnings": warnings,
                "notes": notes,
                "details": dict(r.details),
                "patch": r.outcome.patch,
                "decision": orjson.loads(r.outcome.decision) if r.outcome.decision else None,
            })  # fmt: skip
        sys.stdout.write(orjson.dumps(payload, option=orjson.OPT_INDENT_2).decode() + "\n")
        return code
    chunks = []
    for r in results:
        o = r.outcome
        lines = [f"# carbonshift: {o.kind} {o.name}: {o.result}"]
        if o.reason:
            lines.append(f"#   reason: {o.reason}")
        lines += [f"#   {label}: {text}" for label, text in r.details]
        notes, warnings = notes_and_warnings(r, names)
        lines += [f"#   warning: {text}" for text in warnings]
        lines += [f"#   note: {text}" for text in notes]
        if o.decision:
            lines.append(f"#   decision: {o.decision}")
            lines += fill_lines(o.decision, r.stored)
        body = yaml.safe_dump(r.stored, sort_keys=False, default_flow_style=False)
        chunks.append("\n".join(lines) + "\n" + body)
    sys.stdout.write("---\n".join(chunks))
    return code


def _add_mutate(sub: Any) -> None:
    p = sub.add_parser(
        "mutate",
        help="preview what the webhook would store for some manifests",
        description="Read YAML or JSON manifests (multi-document, or a List; files, "
        "directories as kubectl reads them, or stdin), run each through the webhook's "
        "admission code as a CREATE, and print the objects as they would be stored, each "
        "preceded by comment lines with the outcome and the decision. It is a preview for "
        "reading: nothing is sent to a cluster, and applying the manifests themselves lets "
        "the API server call the webhook. A namespaced object is decided only when its "
        "namespace opted in (label carbonshift.io/enabled=true), as the webhook's "
        "namespaceSelector does: a Namespace object in the input says, else the cluster of "
        "--kubeconfig, else the namespace is assumed opted in and the object's reason says "
        "so. Every handled kind previews: Karmada (Cluster)PropagationPolicies, Karpenter "
        "NodePools, Liqo NamespaceOffloadings (the config's clusters and the input's "
        "virtual-node Nodes as peers), a MultiKueueConfig's carbon order and a Kueue Job's "
        "carbon window (notes say what depends on the live cluster). A document that "
        "cannot be read is "
        "named on stderr and skipped; the others are still shown, and the exit status is "
        "then 1. Input with no object at all is an error (exit status 2). With --reevaluate, "
        "each manifest is taken as already stored (e.g. from kubectl get -o yaml) and put "
        "through the leader's re-evaluation instead: the outcome (kept, switched, too_soon, "
        "stale, user_owned, skipped) and the object as the leader would write it.",
    )
    p.add_argument(
        "-f", "--filename", required=True, action="append", metavar="FILE",
        help="manifest file, directory (its .yaml, .yml and .json files, sorted) or - for "
        "stdin; repeatable",
    )  # fmt: skip
    p.add_argument(
        "-R", "--recursive", action="store_true",
        help="with -f DIR, also read the files of its subdirectories",
    )  # fmt: skip
    p.add_argument("--config", metavar="FILE", help="YAML config (default: built-in, static data)")
    p.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml", help="output format")
    p.add_argument(
        "--reevaluate",
        action="store_true",
        help="re-evaluate stored objects as the leader would now (reevaluate: and hysteresis: "
        "from --config; the forecast needs history the preview does not hold, so it ranks "
        "on current intensity as a freshly started leader does)",
    )
    p.add_argument(
        "--kubeconfig", metavar="FILE",
        help="read the namespaces' carbonshift.io/enabled labels from this cluster (only "
        "namespaces, and the Karmada policy CRDs for the placement shape they keep; "
        "read-only); without it and without a Namespace object in the input, a namespace "
        "is assumed opted in, and karmada.version says the shape",
    )  # fmt: skip
    p.set_defaults(handler=_mutate)


# --- report -----------------------------------------------------------------------------


def _report(args: argparse.Namespace) -> int:
    from webhook.integrations import EVENT_REASONS  # noqa: PLC0415
    from webhook.kube import reads  # noqa: PLC0415 - keeps `--help` fast
    from webhook.report import data, render  # noqa: PLC0415

    try:
        since = data.duration(args.since)
    except ValueError as exc:
        raise UsageError(f"--since: {exc}") from None
    if since <= datetime.timedelta(0):
        raise UsageError(f"--since: {args.since!r} is not a positive duration")
    if args.input:
        try:
            ledger, events, objects = _report_input(args.input)
        except InputProblem as exc:  # the file's problem, naming the file and the key
            print(f"carbonshift report: {args.input}: {exc}", file=sys.stderr)
            return 2
        where = f"read from {args.input} (--input)"
    else:
        try:
            source, events, objects = asyncio.run(_report_cluster(args))
        except reads.ClusterUnreachable as exc:  # a runtime failure, not a usage error
            print(f"carbonshift: {exc}", file=sys.stderr)
            return 1
        ledger, where = source.data, source.where
        try:  # a broken ledger is said, never read as "no accounting yet" or as zeros
            check_ledger(EMPTY if ledger is None else ledger)
        except InputProblem as exc:
            print(f"carbonshift report: {where}: {exc}", file=sys.stderr)
            return 1
    report = data.build(ledger, events, objects, now=datetime.datetime.now(datetime.UTC),
                        since=since, reasons=EVENT_REASONS)  # fmt: skip
    if args.prometheus:
        from webhook.report import prometheus  # noqa: PLC0415

        increases = asyncio.run(prometheus.increases(args.prometheus, since))
        data.overlay(report, increases, start=report.generated - since)
        where += f"; per-workload figures from {args.prometheus}"
    print(f"carbonshift report: {where}", file=sys.stderr)
    out = {"table": render.table, "json": render.to_json, "html": render.page}[args.output]
    sys.stdout.write(out(report))
    return 0


def _report_input(path: str) -> tuple[Any, list[Any], list[Any]]:
    """``--input FILE``: ``{"ledger": {...}, "events": [...], "objects": [...]}``; a
    malformed one raises InputProblem naming the key."""

    try:
        doc = orjson.loads(Path(path).read_bytes())
    except OSError as exc:
        reason = (exc.strerror or str(exc)).lower()
        raise InputProblem("", f"cannot read it: {reason}") from None
    except orjson.JSONDecodeError as exc:
        raise InputProblem("", f"not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise InputProblem("", "expected a JSON object with ledger, events, objects")
    ledger = doc.get("ledger")
    if ledger is not None:
        if not isinstance(ledger, dict):
            raise InputProblem("ledger", "expected the ConfigMap's data (an object of strings)")
        for name, value in ledger.items():
            if not isinstance(value, str):
                raise InputProblem(f'ledger["{name}"]', "expected JSON text (a string)")
        check_ledger(ledger)
    return ledger, _objects_in(doc, "events"), _objects_in(doc, "objects")


def _objects_in(doc: Mapping[str, Any], key: str) -> list[Any]:
    """``--input``'s ``key``: a list of objects (absent or null: none)."""
    value = doc.get(key) or []  # untyped: input check: null is none, a non-list is refused
    if not isinstance(value, list):
        raise InputProblem(key, "expected a list of objects")
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise InputProblem(f"{key}[{index}]", "expected an object")
    return value


async def _report_cluster(args: argparse.Namespace) -> tuple[Any, list[Any], list[Any]]:
    from webhook.integrations import EVENT_REASONS  # noqa: PLC0415
    from webhook.kube import reads  # noqa: PLC0415 - only with a cluster
    from webhook.kube.client import connect, settings  # noqa: PLC0415
    from webhook.runtime.tasks import closed  # noqa: PLC0415

    if args.namespace is not None and not certs.DNS_LABEL.fullmatch(args.namespace):
        raise UsageError(f"--namespace {args.namespace}: not a namespace name (a DNS label)")
    name = args.configmap
    if name is not None and not all(certs.DNS_LABEL.fullmatch(p) for p in name.split(".")):
        raise UsageError(f"--configmap {name}: not a ConfigMap name (a DNS subdomain)")
    config = _config(args)
    where = settings(args.kubeconfig, namespace=args.namespace,
                     default_namespace=config.service.namespace)  # fmt: skip
    if where is None:
        raise UsageError("no cluster: pass --kubeconfig, set KUBECONFIG, or use --input FILE")
    api = await connect(where, _kubeconfig_flag(args.kubeconfig))
    try:
        return await reads.collect(
            api, args.configmap or config.accounting.configmap, args.namespace, where.namespace,
            EVENT_REASONS,
        )  # fmt: skip
    finally:
        await closed(api.close())


def _add_report(sub: Any) -> None:
    p = sub.add_parser(
        "report",
        help="show the carbon accounting: energy, emissions, counterfactual, avoided",
        description="Per workload: energy, intensity, emissions, the counterfactual (the "
        "same replicas placed as the user's own policy would have placed them), avoided "
        "emissions, share saved and moves; per cluster: replica-hours gained or lost "
        "against the counterfactual and the emissions there; and the decision history "
        "(carbonshift's Events and the switches in decision annotations). Reads the "
        "leader's accounting ConfigMap wherever the leader keeps it (by its labels) and "
        "says on stderr where it read. -o html prints one self-contained HTML page with "
        "plots to stdout.",
    )
    p.add_argument("--since", default="7d", help="the window every section covers: 7d, "
                   "24h, 30m; the ledger's figures run since accounting began, so an "
                   "earlier start widens it, which the header says (default: "
                   "%(default)s)")  # fmt: skip
    p.add_argument("-o", "--output", choices=("table", "json", "html"), default="table")
    p.add_argument("--kubeconfig", metavar="FILE", help="API server to read from "
                   "(default: KUBECONFIG, else in-cluster)")  # fmt: skip
    p.add_argument("--namespace", metavar="NS", help="read the accounting ConfigMap in this "
                   "namespace only (default: find it by its labels in any namespace, the "
                   "leader's lease namespace)")  # fmt: skip
    p.add_argument("--configmap", metavar="NAME", help="name of the accounting ConfigMap "
                   "(default: accounting.configmap of --config, carbonshift-accounting "
                   "by default)")  # fmt: skip
    p.add_argument("--config", metavar="FILE", help="YAML config (accounting.configmap)")
    p.add_argument("--prometheus", metavar="URL", help="take the per-workload figures over "
                   "--since from this Prometheus (its /api/v1/query)")  # fmt: skip
    p.add_argument("--input", metavar="FILE", help="read the data from this JSON file "
                   "instead of an API server")  # fmt: skip
    p.set_defaults(handler=_report)


# --- main -------------------------------------------------------------------------------

COMMANDS: tuple[Callable[[Any], None], ...] = (
    _add_serve,
    _add_certs,
    _add_mutate,
    cli_intensity.add_parser,
    simulate_cli.add_parser,
    _add_report,
    cli_explain.add_parser,
)


def parser(prog: str = "carbonshift") -> argparse.ArgumentParser:
    """The full argument parser (all subcommands)."""
    p = _Parser(
        prog=prog,
        description="Carbon-aware placement for Kubernetes fleets: a mutating admission webhook "
        "for Karmada PropagationPolicies and Karpenter NodePools, and a filter/score API for "
        "schedulers, driven by grid carbon intensity.",
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in COMMANDS:
        add(sub)
    return p


def main(argv: Sequence[str] | None = None, prog: str = "carbonshift") -> int:
    """Entry point of the ``carbonshift`` console script."""
    args = parser(prog).parse_args(argv)
    handler: Handler = args.handler
    logs.configure("warning", stream=sys.stderr)  # `serve` switches to JSON on stdout
    try:
        code = handler(args)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
    except InvalidInput as exc:  # the config file, a provider section, CARBONSHIFT_REDIS_URL
        print(error_line(exc, getattr(args, "config", None)), file=sys.stderr)
        return 2
    except UsageError as exc:
        print(f"carbonshift: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `carbonshift ... | head`: the reader has gone, say nothing
        return _closed_pipe()
    except KeyboardInterrupt:
        return 130
    return code


def kubectl_plugin() -> int:
    """Entry point of the ``kubectl-carbonshift`` console script: kubectl runs it for
    ``kubectl carbonshift ...`` (``kubectl carbonshift explain pp/web -n shop``)."""
    return main(prog="kubectl carbonshift")


def _closed_pipe() -> int:
    """Exit quietly when stdout's reader has gone, as Python's documentation recommends
    (``signal``, "Note on SIGPIPE"): point stdout at /dev/null so the interpreter's final
    flush cannot fail again, and return 141, the status of a process killed by SIGPIPE."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return PIPE_CLOSED
