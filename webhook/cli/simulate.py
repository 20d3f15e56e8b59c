"""``carbonshift simulate``: replay hourly traces through the decision core and compare policies."""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from webhook.decision import seasonal
from webhook.model.traces import SHIPPED, TraceError
from webhook.model.validation import InvalidInput
from webhook.simulate import grid as grid_mod
from webhook.simulate import report
from webhook.simulate.outcome import Outcome, simulate
from webhook.simulate.scenario import Compare, in_file, load

_DESCRIPTION = """\
Replay hourly grid-intensity traces (Electricity Maps export format) through carbonshift's
decision core and compare placement policies side by side: a carbon-agnostic baseline, the
greedy top-N operator, carbonshift's weights / green-first affinities / max-intensity filter
(with hysteresis and dwell, on current intensity or an honest forecast), NodePool pause for
batch jobs, and a perfect-knowledge oracle (the upper bound).

Savings are ratio-of-sums against the baseline; "of oracle %" is the share of the oracle's
saving a policy captures. moves/day counts replicas that change cluster; updates/day counts
PropagationPolicy rewrites (spatial) or NodePool pause toggles (temporal).
"""

_EPILOG = """\
keys for --set / --sweep (a dotted path into the scenario's sections):
  policy.SECTION.KEY  a key of the product's config file carbonshift's rows run under,
                      e.g. policy.hysteresis.margin, policy.weighting.exponent
  compare.KEY         a parameter of the compared rows:
                      {keys}

examples:
  carbonshift simulate scenarios/spatial-2023.yaml
  carbonshift simulate scenarios/batch-24h-2023.yaml --report reports/batch
  carbonshift simulate scenarios/spatial-2023.yaml --policies green-first-forecast \\
      --sweep policy.hysteresis.margin=0.05,0.1 --sweep policy.hysteresis.dwell_hours=6,24
"""


def _epilog() -> str:
    return _EPILOG.format(keys=", ".join(Compare.__struct_fields__))


def default_traces() -> Path | None:
    """The Electricity Maps 2023 traces shipped in the package (``model.traces.SHIPPED``)."""
    return SHIPPED if SHIPPED.is_dir() else None


def add_parser(subparsers: Any) -> None:
    """Register the ``simulate`` sub-command on an argparse ``subparsers`` object."""
    parser = subparsers.add_parser(
        "simulate",
        help="replay carbon-intensity traces and compare placement policies",
        description=_DESCRIPTION,
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    configure(parser)


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``simulate`` arguments to ``parser``."""
    parser.add_argument("scenario", metavar="SCENARIO.yaml", help="scenario file (see scenarios/)")
    found = default_traces()
    parser.add_argument(
        "--traces",
        metavar="DIR",
        type=Path,
        default=found,
        help="folder of hourly trace CSVs, one or more per zone"
        + (f" (default: {found})" if found else " (required: no default folder found)"),
    )
    parser.add_argument(
        "--report", metavar="DIR", type=Path, help="write an HTML report with plots into DIR"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument(
        "--policies",
        metavar="KEY[,KEY]",
        default="",
        help="run only these policies (baseline and oracle always run)",
    )
    parser.add_argument(
        "--set",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        dest="overrides",
        help="override a setting by its dotted path, e.g. --set policy.hysteresis.margin=0.1"
        " or --set compare.top_n=2 (repeatable)",
    )
    parser.add_argument(
        "--sweep",
        metavar="KEY=V1,V2",
        action="append",
        default=[],
        help="run once per value (repeatable: every combination) and print one table",
    )
    bar = parser.add_mutually_exclusive_group()
    bar.add_argument(
        "--progress",
        action="store_true",
        default=None,
        help="show a progress bar on stderr (default: only when stderr is a terminal)",
    )
    bar.add_argument(
        "--no-progress", action="store_false", dest="progress", help="never show the bar"
    )
    parser.set_defaults(handler=run)


def _pairs(items: Sequence[str], flag: str) -> list[tuple[str, str]]:
    out = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InvalidInput(flag, f"expected KEY=VALUE, got {item!r}")
        out.append((key.strip(), value.strip()))
    return out


def run(args: argparse.Namespace) -> int:
    """Execute ``simulate``; returns the process exit status."""
    try:
        return _run(args)
    except (
        InvalidInput,
        TraceError,
        ValueError,
        report.ReportUnavailable,
        seasonal.Unavailable,
    ) as exc:
        print(f"carbonshift simulate: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    if args.traces is None:
        raise InvalidInput("--traces", "no default trace folder found; pass --traces DIR")
    if args.traces.exists() and not args.traces.is_dir():
        raise InvalidInput("--traces", f"{args.traces} is a file, not a folder of trace CSVs")
    if args.report is not None:
        report.require_matplotlib()
        _check_report_dir(args.report)
    progress = sys.stderr.isatty() if args.progress is None else args.progress
    only = [p.strip() for p in args.policies.split(",") if p.strip()]
    base = dict(_pairs(args.overrides, "--set"))
    sweeps = [(k, v.split(",")) for k, v in _pairs(args.sweep, "--sweep")]
    scenario = load(args.scenario, base)
    try:
        grid = grid_mod.load(scenario, args.traces)
    except InvalidInput as exc:  # a zone or the span of the file the traces do not cover
        raise in_file(exc, args.scenario) from None
    if scenario.batch and not seasonal.available():
        print(f"carbonshift simulate: {seasonal.UNAVAILABLE}", file=sys.stderr)
    if sweeps:
        return _sweep(args, base=base, sweeps=sweeps, grid=grid, only=only, progress=progress)
    outcome = simulate(scenario, grid, progress=progress, only=only)
    if args.json:
        print(json.dumps(report.to_json(outcome), indent=2))
    else:
        print(report.text(outcome))
    if args.report is not None:
        path = report.write_html(outcome, args.report)
        print(f"report written to {path}", file=sys.stderr)
    return 0


def _check_report_dir(path: Path) -> None:
    """Refuse a ``--report`` folder that cannot be written before the simulation runs,
    rather than after it."""
    if path.exists() and not path.is_dir():
        raise InvalidInput("--report", f"{path} is a file, not a folder")
    parent = next((p for p in (path, *path.parents) if p.exists()), Path())
    if not parent.is_dir():
        raise InvalidInput("--report", f"cannot create {path}: {parent} is a file")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InvalidInput("--report", f"cannot create {path}: {parent} is not writable")


def _sweep(
    args: argparse.Namespace,
    *,
    base: dict[str, str],
    sweeps: list[tuple[str, list[str]]],
    grid: grid_mod.Grid,
    only: list[str],
    progress: bool,
) -> int:
    keys = [k for k, _ in sweeps]
    results: list[tuple[dict[str, str], Outcome]] = []
    for values in itertools.product(*(v for _, v in sweeps)):
        setting = dict(zip(keys, values, strict=True))
        scenario = load(args.scenario, {**base, **setting})
        results.append((setting, simulate(scenario, grid, progress=progress, only=only)))
    if args.json:
        doc = [{"set": s, **report.to_json(o)} for s, o in results]
        print(json.dumps(doc, indent=2))
        return 0
    for part in ("spatial", "temporal", "multikueue"):
        blocks = []
        for setting, outcome in results:
            section = getattr(outcome, part)
            if section is None:
                continue
            label = " ".join(f"{k}={v}" for k, v in setting.items())
            rows = [r for r in section.rows if r.role == "policy"]
            blocks.append(f"[{label}]\n" + report.table(rows, temporal=part != "spatial"))
        if blocks:
            print(f"{part} sweep (baseline and oracle do not depend on policy settings)")
            print("\n\n".join(blocks))
            print()
    print(report.attribution(grid))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``carbonshift simulate`` on its own."""
    parser = argparse.ArgumentParser(
        prog="carbonshift simulate",
        description=_DESCRIPTION,
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    configure(parser)
    args = parser.parse_args(argv)
    return run(args)
