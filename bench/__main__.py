"""``python -m bench [NAME ...]``: run benchmarks, results into bench/results/ and the docs."""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bench import admission, fleet, reevaluate, schedule, score, soak

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
        "two passes of the leader over 10,000 managed ordered-fill PropagationPolicies, "
        "their ResourceBindings and 100 Clusters, the second after room changed on every "
        "cluster: CPU seconds per pass on one core (re-evaluation + move back), moves "
        "planned, writes proposed, RSS (bench/reevaluate.py)",
    ),
    "reevaluate-large": (
        reevaluate.large,
        "the same two passes over 100,000 policies, their bindings and 1,000 Clusters "
        "(bench/reevaluate.py; a few minutes, about 2 GB)",
    ),
    "reevaluate-short": (
        reevaluate.short,
        "the same at 300 policies on 20 clusters, recorded nowhere (what CI runs)",
    ),
    "schedule": (
        schedule.main,
        "karmada-scheduler with and without the CarbonAware plugin: 500 ResourceBindings "
        "over 1,000 Clusters, throughput and p50/p99 creation to placement "
        "(bench/schedule.py; needs the sandbox binaries)",
    ),
    "soak": (
        soak.main,
        "ten minutes of admissions + scores at half of the measured maximum: RSS, open "
        "file descriptors and p99 per minute, with a plot (bench/soak.py; --seconds is the "
        "length of each of the ten segments, default 60)",
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
        "(Debian package) to core 1. Results go to bench/results/*.json and the tables in\n"
        "docs/benchmarks.md and docs/scheduler.md.",
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
