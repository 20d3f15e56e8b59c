"""The ``carbonshift`` command line.

Exit codes: 0 success, 1 runtime failure, 2 bad usage or bad configuration.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson
import yaml

from webhook import __version__
from webhook.cli import intensity as cli_intensity
from webhook.cli import report as report_cli
from webhook.cli import simulate as simulate_cli
from webhook.model.config import Config, error_line, load
from webhook.model.errors import UsageError
from webhook.model.validation import InvalidInput, yaml_reason
from webhook.runtime import logs
from webhook.serve import certs

Handler = Callable[[argparse.Namespace], int]


PIPE_CLOSED = 128 + signal.SIGPIPE
"""Exit status when the reader of stdout went away (``carbonshift ... | head``)."""


def _config(args: argparse.Namespace) -> Config:
    return load(args.config)


# --- serve ------------------------------------------------------------------------------


def _serve(args: argparse.Namespace) -> int:
    from webhook.kube.client import settings  # noqa: PLC0415
    from webhook.serve import server  # noqa: PLC0415 - keeps `carbonshift --help` fast

    config = _config(args)
    kube = settings(
        args.kubeconfig,
        namespace=args.lease_namespace,
        default_namespace=config.service.namespace,
        lease=args.lease_name,
    )
    logs.configure(args.log_level)
    try:
        import uvloop  # noqa: PLC0415 - optional speed-up

        runner: Callable[[Any], Any] = uvloop.run
    except ImportError:
        runner = asyncio.run
    try:
        runner(
            server.serve(
                config,
                host=args.host,
                port=args.port,
                cert_dir=Path(args.cert_dir),
                cert_reload_seconds=args.cert_reload_seconds,
                shutdown_seconds=args.shutdown_seconds,
                kube=kube,
            )
        )
    except server.ListenError as exc:  # a runtime failure, not a usage error
        print(f"carbonshift: {exc}", file=sys.stderr)
        return 1
    return 0


def _add_serve(sub: Any) -> None:
    p = sub.add_parser(
        "serve",
        help="run the HTTPS webhook and scheduler API",
        description="Serve POST /mutate (AdmissionReview), GET /healthz, /readyz and /metrics "
        "over HTTPS. With no certificate in --cert-dir a development CA and serving "
        "certificate are created there; certificate files are re-read when they change.",
    )
    p.add_argument("--config", metavar="FILE", help="YAML config (default: built-in, static data)")
    p.add_argument("--host", default="0.0.0.0", help="address to bind (default: %(default)s)")  # noqa: S104
    p.add_argument("--port", type=int, default=8443, help="HTTPS port (default: %(default)s)")
    p.add_argument(
        "--cert-dir",
        default="certs",
        metavar="DIR",
        help="directory with tls.crt and tls.key (default: %(default)s)",
    )
    p.add_argument(
        "--cert-reload-seconds",
        type=float,
        default=10.0,
        metavar="S",
        help="how often to check the certificate files for changes (default: %(default)s)",
    )
    p.add_argument(
        "--shutdown-seconds",
        type=float,
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
    existing = [out / name for name in certs.BUNDLE_FILES if (out / name).exists()]
    if existing and not args.force:
        raise UsageError(
            f"{existing[0]} exists: pass --force to replace the CA and certificate in {out} "
            "(every caBundle that trusts the old CA must then be updated)"
        )
    hosts = certs.service_hosts(args.service, args.namespace, [*args.dns, *args.ip])
    bundle = certs.issue(hosts)
    bundle.write(out)
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
    p.add_argument("--ip", action="append", default=[], help="extra IP SAN (repeatable)")
    p.add_argument("--dns", action="append", default=[], help="extra DNS SAN (repeatable)")
    p.add_argument("--out", required=True, metavar="DIR", help="directory to write to")
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
        items = doc.get("items") or [] if is_list else [doc]
        for item_index, item in enumerate(items):
            name = f"{where}, item {item_index}" if is_list else where
            if not isinstance(item, dict) or "kind" not in item or "apiVersion" not in item:
                problems.append(f"{name}: needs apiVersion and kind; skipped")
                continue
            objects.append(item)


async def _preview(
    config: Config, docs: list[dict[str, Any]], *, again: bool, kubeconfig: str | None = None
) -> list[Any]:
    from webhook.cli import preview  # noqa: PLC0415
    from webhook.kinds import Context  # noqa: PLC0415
    from webhook.kinds.reevaluation import Reevaluation  # noqa: PLC0415
    from webhook.model.intensity import utcnow  # noqa: PLC0415
    from webhook.serve import server  # noqa: PLC0415

    namespaces = await preview.cluster_namespaces(kubeconfig) if kubeconfig else None
    feed = server.build_feed(config)
    try:
        await feed.refresh_once()
        ctx = Context(config=config, table=feed.table(), now=utcnow())
        if again:
            return preview.reevaluate(docs, ctx, Reevaluation(config, feed.outlook), namespaces)
        return preview.preview(docs, ctx, namespaces)
    finally:
        await feed.stop()


def _mutate(args: argparse.Namespace) -> int:
    config = _config(args)
    docs, problems = _read_documents(args.filename, recursive=args.recursive)
    for problem in problems:
        sys.stderr.write(f"carbonshift: {problem}\n")
    results = asyncio.run(_preview(config, docs, again=args.reevaluate, kubeconfig=args.kubeconfig))
    code = 1 if problems else 0
    if args.output == "json":
        payload = [
            {
                "object": r.stored,
                "outcome": r.outcome.result,
                "reason": r.outcome.reason or None,
                "warnings": r.outcome.warnings,
                "patch": r.outcome.patch,
                "decision": orjson.loads(r.outcome.decision) if r.outcome.decision else None,
            }
            for r in results
        ]
        sys.stdout.write(orjson.dumps(payload, option=orjson.OPT_INDENT_2).decode() + "\n")
        return code
    chunks = []
    for r in results:
        o = r.outcome
        lines = [f"# carbonshift: {o.kind} {o.name}: {o.result}"]
        if o.reason:
            lines.append(f"#   reason: {o.reason}")
        lines += [f"#   warning: {w}" for w in o.warnings]
        if o.decision:
            lines.append(f"#   decision: {o.decision}")
            lines += _fill_lines(orjson.loads(o.decision))
        body = yaml.safe_dump(r.stored, sort_keys=False, default_flow_style=False)
        chunks.append("\n".join(lines) + "\n" + body)
    sys.stdout.write("---\n".join(chunks))
    return code


def _fill_lines(decision: Any) -> list[str]:
    """Comment lines for an ordered fill: its tiers, greenest first, and the room assumed."""
    clusters = decision.get("clusters") if isinstance(decision, dict) else None
    if not isinstance(clusters, dict):
        return []
    tiers: dict[int, list[str]] = {}
    for name, entry in sorted(clusters.items()):
        if isinstance(entry, dict) and isinstance(entry.get("t"), int):
            g = entry.get("g")
            tiers.setdefault(entry["t"], []).append(f"{name} {g:g} g" if g is not None else name)
    if not tiers:
        return []
    order = " -> ".join(", ".join(tiers[k]) for k in sorted(tiers))
    return [
        f"#   tiers: {order}",
        "#   room: each tier takes what Karmada estimates its clusters can hold when it"
        " schedules (Cluster status.resourceSummary); the rest overflows to the next tier",
    ]


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
        "so. A document that cannot be read is "
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
        "namespaces, read-only); without it and without a Namespace object in the input, "
        "a namespace is assumed opted in",
    )  # fmt: skip
    p.set_defaults(handler=_mutate)


# --- main -------------------------------------------------------------------------------

COMMANDS: tuple[Callable[[Any], None], ...] = (
    _add_serve,
    _add_certs,
    _add_mutate,
    cli_intensity.add_parser,
    simulate_cli.add_parser,
    report_cli.add_parser,
)


def parser() -> argparse.ArgumentParser:
    """The full argument parser (all subcommands)."""
    p = argparse.ArgumentParser(
        prog="carbonshift",
        description="Carbon-aware placement for Kubernetes fleets: a mutating admission webhook "
        "for Karmada PropagationPolicies and Karpenter NodePools, and a filter/score API for "
        "schedulers, driven by grid carbon intensity.",
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in COMMANDS:
        add(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``carbonshift`` console script."""
    args = parser().parse_args(argv)
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


def _closed_pipe() -> int:
    """Exit quietly when stdout's reader has gone, as Python's documentation recommends
    (``signal``, "Note on SIGPIPE"): point stdout at /dev/null so the interpreter's final
    flush cannot fail again, and return 141, the status of a process killed by SIGPIPE."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return PIPE_CLOSED
