"""``python -m bench [NAME ...]``: run benchmarks, results into bench/results/ and README."""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bench import admission, fleet, reevaluate, score

BENCHMARKS: Mapping[str, tuple[Callable[..., Any], str]] = {
    "admission": (
        admission.main,
        "POST /mutate throughput and p99 against an echo floor, every review distinct "
        "(bench/admission.py; 10 s per measured run by default)",
    ),
    "fleet": (
        fleet.main,
        "5,000 Karmada Clusters in a real kube-apiserver: inventory sync time, serve RSS and "
        "admission throughput with the inventory (bench/fleet.py; needs the sandbox binaries)",
    ),
    "reevaluate": (
        reevaluate.main,
        "one re-evaluation pass over 10,000 managed PropagationPolicies on 100 clusters, "
        "nothing changed: CPU seconds on one core, writes proposed, RSS (bench/reevaluate.py)",
    ),
    "score": (
        score.main,
        "Karmada score endpoint with 10, 100 and 1000 clusters per request "
        "(bench/score.py; 5 s per measured run by default)",
    ),
}


def parser() -> argparse.ArgumentParser:
    listing = "\n".join(
        textwrap.fill(text, 79, initial_indent=f"  {name:11}", subsequent_indent=" " * 13)
        for name, (_, text) in BENCHMARKS.items()
    )
    p = argparse.ArgumentParser(
        prog="python -m bench",
        description="carbonshift benchmarks (make bench): the server pinned to core 0, wrk\n"
        "(Debian package) to core 1. Results go to bench/results/*.json and the README tables.",
        epilog=f"benchmarks:\n{listing}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help=f"benchmarks to run, in order: {', '.join(BENCHMARKS)} (default: all)",
    )
    p.add_argument(
        "--seconds",
        type=int,
        default=None,
        help="length of each measured wrk run (default: each benchmark's own)",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    unknown = [name for name in args.names if name not in BENCHMARKS]
    if unknown:
        p.error(f"unknown benchmark {', '.join(unknown)} (choose from {', '.join(BENCHMARKS)})")
    if args.seconds is not None and args.seconds < 1:
        p.error("--seconds must be at least 1")
    options = {} if args.seconds is None else {"seconds": args.seconds}
    for name in dict.fromkeys(args.names or BENCHMARKS):
        run, _ = BENCHMARKS[name]
        run(**options)
    return 0


if __name__ == "__main__":
    sys.exit(main())
