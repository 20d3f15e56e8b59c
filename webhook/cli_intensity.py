"""``carbonshift intensity``: what the feed would answer right now, zone by zone.

Runs one refresh through the configured provider chain (and the shared cache when
``CARBONSHIFT_REDIS_URL`` is set) and prints, per zone, the value, its signal, the
provider that answered, the age of the data and the estimated/stale flags, plus why
earlier providers in the chain did not answer. Exit status: 0 when every zone has data,
1 when some have none, 2 for a configuration problem.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence
from typing import Any, TextIO

import orjson
import structlog

from webhook import config as config_mod
from webhook.feed import IntensityFeed, ZoneStatus
from webhook.intensity import utcnow
from webhook.validation import InvalidInput


def add_parser(subparsers: Any) -> None:
    """Register ``intensity`` on an ``argparse`` sub-parser collection.

    The parser's ``handler`` default is :func:`run` (``args -> exit status``), as for
    the other ``carbonshift`` subcommands.
    """
    parser = subparsers.add_parser(
        "intensity",
        help="show the current carbon intensity per zone and where it came from",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument(
        "zones", nargs="*", metavar="ZONE",
        help="grid zone keys (default: every zone the configuration uses)",
    )  # fmt: skip
    parser.add_argument("--config", metavar="FILE", help="configuration file (YAML)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Entry point for the parsed ``intensity`` command; returns the exit status."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        cfg = config_mod.load(args.config)
        zones = list(dict.fromkeys(args.zones)) or list(cfg.zones_in_use())
        if not zones:
            err.write(
                "carbonshift intensity: no zones. Name some (carbonshift intensity DE FR) or "
                "pass --config with clusters or a zone.\n"
            )
            return 2
        feed = IntensityFeed.from_config(cfg, zones)
    except (InvalidInput, ValueError) as exc:  # bad configuration or Redis URL
        err.write(f"carbonshift intensity: {exc}\n")
        return 2
    statuses = asyncio.run(_collect(feed, zones))
    if args.json:
        out.write(
            orjson.dumps([_as_json(s) for s in statuses], option=orjson.OPT_INDENT_2).decode()
        )
        out.write("\n")
    else:
        out.write(render_table(statuses))
    missing = [s.zone for s in statuses if s.reading is None]
    if missing:
        err.write(
            f"carbonshift intensity: no data for {', '.join(missing)}: check the zone keys and "
            "the reasons above, or add a provider that covers them (e.g. static) to "
            "`providers`.\n"
        )
        return 1
    return 0


async def _collect(feed: IntensityFeed, zones: Sequence[str]) -> list[ZoneStatus]:
    try:
        await feed.refresh_once()
        return [feed.status(z) for z in zones]
    finally:
        await feed.stop()


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def _as_json(status: ZoneStatus) -> dict[str, Any]:
    reading = status.reading
    now = utcnow()
    return {
        "zone": status.zone,
        "provider": status.provider,
        "value": reading.value if reading else None,
        "unit": "gCO2eq/kWh",
        "signal": reading.signal.value if reading else None,
        "source": reading.source if reading else None,
        "valid_from": reading.valid_from.isoformat() if reading else None,
        "valid_to": reading.valid_to.isoformat() if reading else None,
        "age_seconds": round(reading.age_seconds(now)) if reading else None,
        "estimated": reading.estimated if reading else None,
        "stale": reading.stale if reading else None,
        "problems": dict(status.problems),
    }


def render_table(statuses: Sequence[ZoneStatus]) -> str:
    """Aligned text table, one zone per line, then one line per provider problem."""
    now = utcnow()
    header = ("ZONE", "GCO2EQ/KWH", "SIGNAL", "SOURCE", "AGE", "ESTIMATED", "STALE")
    rows = [header]
    for s in statuses:
        r = s.reading
        if r is None:
            rows.append((s.zone, "-", "-", "(no data)", "-", "-", "-"))
            continue
        rows.append(
            (
                s.zone,
                f"{r.value:.1f}",
                r.signal.value,
                r.source,
                _age(r.age_seconds(now)),
                "yes" if r.estimated else "no",
                "STALE" if r.stale else "no",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    notes = [f"  {s.zone}: {reason}" for s in statuses for reason in s.problems.values()]
    if notes:
        lines += ["", "Fallbacks:", *notes]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Standalone entry point (``python -m webhook.cli_intensity``)."""
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
    parser = argparse.ArgumentParser(prog="carbonshift")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["intensity", *(argv if argv is not None else sys.argv[1:])])
    status: int = args.handler(args)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
