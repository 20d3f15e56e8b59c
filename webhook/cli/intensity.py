"""``carbonshift intensity``: what the feed would answer right now, zone by zone.

Runs one refresh through the configured provider chain (and the shared cache when
``CARBONSHIFT_REDIS_URL`` is set) and prints, per zone, the value, its signal, the
provider that answered, the age of the data and the estimated/stale flags, plus why
earlier providers in the chain did not answer. Exit status: 0 when every zone has data,
1 when some have none (or the API server does not answer), 2 for a configuration problem.

Then, per zone, the forecast the re-evaluation uses (``reevaluate.forecast``; with
``best``, the forecaster that ranked the zone's hours best) and how well each
forecaster, the day-ahead profile, the seasonal forecaster (the ``forecast`` extra; one
line says so where it is not installed) and the provider's own forecast, ranked the hours
of windows of ``--window`` hours: WattTime's three measures (the Spearman rank
correlation with what was observed, the saving its greenest start captured of the
greenest start's, the normalised mean absolute error), the share of each window's truly
greenest quarter it picked, and the number of windows these rest on
(``webhook/feed/judging.py``). One run holds only what the provider gives
at once (its past day, its current forecast), so it has few or no windows to judge; the
serving process judges the last 7 days it kept.

With ``--clusters`` it lists the fleet's member clusters instead: each with its grid zone,
where that zone came from (``label``, ``annotation``, ``config``, ``region-table`` or
``unknown``) and the zone's current intensity. With a kubeconfig (``--kubeconfig``,
``KUBECONFIG`` or in-cluster) the members are the Karmada Clusters of the API server, read
exactly as ``carbonshift serve`` reads them (config ``clusters:`` are overrides and
config-only members still count); without one, the config's ``clusters:``. The remote
clusters behind Liqo's virtual nodes on that API server are listed too, as
``liqo/<cluster id>`` (:mod:`webhook.decision.liqo.peers`: the same order of zone sources), and
Open Cluster Management's ManagedClusters as ``ocm/<name>`` (:mod:`webhook.decision.ocm`).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import re
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

import msgspec
import orjson
import structlog

from webhook.decision import ocm, seasonal
from webhook.decision.fleet import ZoneSource, entry, name_of
from webhook.decision.forecast_quality import NO_WINDOWS, Quality
from webhook.decision.liqo import peers as liqo
from webhook.feed.history import ISSUE_HOURS
from webhook.feed.judging import BEST, FORECASTERS, SEASONAL, WINDOW_HOURS, Judgement
from webhook.model import config as config_mod
from webhook.model.config import Config
from webhook.model.errors import UsageError
from webhook.model.intensity import utcnow
from webhook.model.objects import items
from webhook.model.validation import InvalidInput
from webhook.model.zones import zone_problem
from webhook.runtime import logs
from webhook.runtime.tasks import closed

if TYPE_CHECKING:
    from webhook.feed import IntensityFeed, ZoneStatus
    from webhook.kube.reads import Listed


def _feed(cfg: Config, zones: Sequence[str]) -> IntensityFeed:
    """The feed for ``zones`` (imported here: the providers' HTTP stack loads only for a
    command that reads intensities)."""
    from webhook.feed import IntensityFeed  # noqa: PLC0415 - deferred on purpose
    from webhook.feed.zones import check_config  # noqa: PLC0415

    # One-off: the seasonal forecaster is judged too, whatever feed.seasonal says (its fits
    # block no admission here).
    judged = msgspec.structs.replace(cfg, feed=msgspec.structs.replace(cfg.feed, seasonal=True))
    feed = IntensityFeed.from_config(judged, zones)
    check_config(cfg, feed.providers)  # as serve and mutate refuse the config's zones
    return feed


def add_parser(subparsers: Any) -> None:
    """Register ``intensity`` on an ``argparse`` sub-parser collection.

    The parser's ``handler`` default is :func:`run` (``args -> exit status``), as for
    the other ``carbonshift`` subcommands.
    """
    parser = subparsers.add_parser(
        "intensity",
        help="show the current carbon intensity per zone and where it came from",
        description=plain(__doc__.split("\n\n")[0]) if __doc__ else None,
        epilog=plain("\n\n".join(__doc__.split("\n\n")[1:4])) if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "zones", nargs="*", metavar="ZONE",
        help="grid zone keys (default: every zone the configuration uses)",
    )  # fmt: skip
    parser.add_argument("--config", metavar="FILE", help="configuration file (YAML)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "-o", "--output", choices=("table", "json"), default="table",
        help="output format (-o json is --json)",
    )  # fmt: skip
    parser.add_argument(
        "--window", type=_window, default=WINDOW_HOURS, metavar="HOURS",
        help="hours ahead of the windows the forecasters are judged on "
        f"(1-{ISSUE_HOURS}, default {WINDOW_HOURS}: a day, the longest max-pause)",
    )  # fmt: skip
    parser.add_argument(
        "--clusters", action="store_true",
        help="list the member clusters with their zone, where it came from, and its intensity",
    )  # fmt: skip
    parser.add_argument(
        "--kubeconfig", metavar="FILE",
        help="with --clusters: read the Karmada Clusters from this API server "
        "(default: KUBECONFIG, else in-cluster, else the config's clusters)",
    )  # fmt: skip
    parser.set_defaults(handler=run)


def _window(text: str) -> int:
    """``--window``: whole hours, 1 to :data:`~webhook.feed.history.ISSUE_HOURS`."""
    try:
        hours = int(text)
    except ValueError:
        hours = 0
    if not 1 <= hours <= ISSUE_HOURS:
        raise argparse.ArgumentTypeError(f"expected whole hours 1-{ISSUE_HOURS}, got {text!r}")
    return hours


_MARKUP = re.compile(r"``(?P<literal>[^`]+)``|:[a-z]+:`~?(?P<role>[^`]+)`")


def plain(text: str) -> str:
    """A docstring paragraph as plain help text: reStructuredText literals and roles
    (double backticks, ``:class:`...```) become their bare text."""
    return _MARKUP.sub(lambda m: m["literal"] or m["role"].rsplit(".", 1)[-1], text)


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Entry point for the parsed ``intensity`` command; returns the exit status."""
    out = out or sys.stdout
    err = err or sys.stderr
    # Every zone's reasons are in the output: the feed's warnings would only repeat them.
    logs.configure("error", stream=sys.stderr)
    if getattr(args, "clusters", False):
        return run_clusters(args, out, err)
    for zone in args.zones:
        if (problem := zone_problem(zone)) is not None:
            raise UsageError(f"intensity: ZONE {zone}: {problem}")
    try:
        cfg = config_mod.load(args.config)
        zones = list(dict.fromkeys(args.zones)) or list(cfg.zones_in_use())
        if not zones:
            err.write(
                "carbonshift intensity: no zones. Name some (carbonshift intensity DE FR) or "
                "pass --config with clusters or a zone.\n"
            )
            return 2
        feed = _feed(cfg, zones)
    except (InvalidInput, ValueError) as exc:  # bad configuration or Redis URL
        err.write(config_mod.error_line(exc, args.config) + "\n")
        return 2
    window = getattr(args, "window", WINDOW_HOURS)
    statuses, judged = asyncio.run(_collect_judged(feed, zones, window))
    used = cfg.reevaluate.forecast
    if _wants_json(args):
        rows = [
            {**_as_json(s), "forecast": _forecast_json(judged[s.zone], used, window)}
            for s in statuses
        ]
        out.write(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode())
        out.write("\n")
    else:
        out.write(render_table(statuses))
        out.write(render_forecasts(judged, used, window))
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


async def _collect_judged(
    feed: IntensityFeed, zones: Sequence[str], window: int
) -> tuple[list[ZoneStatus], dict[str, Judgement | None]]:
    try:
        await feed.refresh_once()
        return [feed.status(z) for z in zones], {z: feed.quality(z, window) for z in zones}
    finally:
        await feed.stop()


def uses(judgement: Judgement, forecast: str) -> str | None:
    """The forecaster the re-evaluation uses for the judged zone under
    ``reevaluate.forecast`` (None: no forecast)."""
    if forecast == BEST:
        return judgement.chosen
    return forecast if forecast in FORECASTERS else None


def _quality_json(q: Quality) -> dict[str, Any]:
    return {
        "windows": q.windows,
        "top_quarter": q.top if q.windows else None,
        "spearman": q.spearman if q.windows else None,
        "captured_percent": q.captured if q.windows else None,
        "nmae_percent": q.nmae if q.windows else None,
    }


def _forecast_json(judgement: Judgement | None, forecast: str, window: int) -> dict[str, Any]:
    if judgement is None:
        return {"setting": forecast, "uses": None, "window_hours": window, "forecasters": {}}
    return {
        "setting": forecast,
        "uses": uses(judgement, forecast),
        "window_hours": window,
        "judged_provider": judgement.provider,
        "forecasters": {f: _quality_json(_judged(judgement, f)) for f in FORECASTERS},
        **({} if seasonal.available() else {"unavailable": {SEASONAL: seasonal.UNAVAILABLE}}),
    }


def _judged(judgement: Judgement, forecaster: str) -> Quality:
    return judgement.quality.get(forecaster, NO_WINDOWS)


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def render_forecasts(judged: Mapping[str, Judgement | None], forecast: str, window: int) -> str:
    """The forecasts block: per zone and forecaster, whether the re-evaluation uses it
    and how well it ranked the hours of ``window``-hour windows; a zone whose forecasters
    were judged on no window yet is left out, and so is the block when every zone is."""
    header = (
        "ZONE",
        "FORECASTER",
        "USED",
        "TOP QUARTER %",
        "SPEARMAN",
        "SAVING CAPTURED %",
        "NMAE %",
        "WINDOWS",
    )
    rows = [header]
    for zone, judgement in judged.items():
        if judgement is None or not any(q.windows for q in judgement.quality.values()):
            continue
        chosen = uses(judgement, forecast)
        for name in FORECASTERS:
            q = _judged(judgement, name)
            rows.append(
                (
                    zone,
                    name if name != "provider" else f"provider ({judgement.provider})",
                    "yes" if chosen == name else "no",
                    f"{100 * q.top:.1f}" if q.windows else "-",
                    f"{q.spearman:.3f}" if q.windows else "-",
                    _percent(q.captured if q.windows else None),
                    _percent(q.nmae if q.windows else None),
                    str(q.windows),
                )
            )
    if len(rows) == 1:
        return ""
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    title = (
        f"Forecasts (reevaluate.forecast: {forecast}; windows of {window} h ahead, "
        "the last 7 days kept):"
    )
    if not seasonal.available():
        lines.append(f"{SEASONAL}: {seasonal.UNAVAILABLE}")
    return "\n".join(["", title, *lines]) + "\n"


def _wants_json(args: argparse.Namespace) -> bool:
    return bool(args.json) or getattr(args, "output", "table") == "json"


# --- --clusters ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Member:
    """One member cluster as ``--clusters`` lists it."""

    name: str
    zone: str | None
    zone_source: ZoneSource
    provider: str | None = None
    region: str | None = None
    ready: bool | None = None
    """The Cluster's ``Ready`` condition; None for a config-only member."""


def members(
    cfg: Config,
    objects: Sequence[Mapping[str, Any]] | None,
    virtual: Sequence[Mapping[str, Any]] = (),
    managed: Sequence[Mapping[str, Any]] = (),
) -> tuple[list[Member], dict[str, str]]:
    """The members, sorted by name, and the Cluster objects left out (name -> why).

    ``objects``: the Karmada Clusters listed from the API server (None: no API server, the
    config's ``clusters:`` are the fleet). Read as the fleet inventory reads them.
    ``virtual``: Liqo's virtual nodes, listed as ``liqo/<remote cluster id>``.
    ``managed``: OCM's ManagedClusters, listed as ``ocm/<name>``.
    """
    found: dict[str, Member] = {}
    skipped: dict[str, str] = {}
    readers = (("liqo", virtual, _peer_member), ("ocm", managed, _managed_member))
    for prefix, listed, read in readers:
        for obj in listed:
            try:
                member = read(obj, cfg)
            except InvalidInput as exc:
                skipped[f"{prefix}/{name_of(obj)}"] = str(exc)
                continue
            found[member.name] = member
    for obj in objects or ():
        try:
            e = entry(obj, cfg)
        except InvalidInput as exc:
            skipped[name_of(obj)] = str(exc)
            continue
        found[e.name] = Member(e.name, e.grid_zone, e.zone_source, e.provider, e.region, e.ready)
    for name, c in cfg.clusters.items():
        if name not in found and name not in skipped and f"ocm/{name}" not in found:
            found[name] = Member(name, c.grid_zone, "config", c.provider, c.region)
    return [found[n] for n in sorted(found)], skipped


def _peer_member(node: Mapping[str, Any], cfg: Config) -> Member:
    """A Liqo virtual node as ``liqo/<remote cluster id>``."""
    p = liqo.peer(node, cfg)
    name = f"liqo/{p.cluster_id}"
    return Member(name, p.grid_zone, p.zone_source, p.provider, p.region, _ready_node(node))


def _managed_member(obj: Mapping[str, Any], cfg: Config) -> Member:
    """An OCM ManagedCluster as ``ocm/<name>``."""
    e = ocm.managed_cluster(obj, cfg)
    return Member(f"ocm/{e.name}", e.grid_zone, e.zone_source, e.provider, e.region, e.ready)


def _ready_node(node: Mapping[str, Any]) -> bool:
    return any(
        isinstance(c, Mapping) and c.get("type") == "Ready" and c.get("status") == "True"
        for c in items(node, "status", "conditions")
    )


async def _list_clusters(args: argparse.Namespace, cfg: Config) -> Listed | None:
    """The Cluster objects and virtual Nodes of the API server; None without a kubeconfig
    or cluster. An API server without the Cluster CRD (a Liqo cluster) has no Clusters."""
    from webhook.kube import client, reads  # noqa: PLC0415 - only with a cluster

    kube = client.settings(args.kubeconfig, default_namespace=cfg.service.namespace)
    if kube is None:
        return None
    flag = "--kubeconfig" if args.kubeconfig else "KUBECONFIG"
    api = await client.connect(kube, flag)  # a bad kubeconfig: one line, exit status 2
    try:
        listed, missing = await reads.fleet(api)
    except reads.NETWORK_ERRORS as exc:  # unreachable: a runtime failure, exit status 1
        raise reads.unreachable(api, exc) from None
    except Exception as exc:  # refused
        raise _unlisted(kube.kubeconfig, exc) from None
    finally:
        await closed(api.close())
    if missing is not None and not listed[1] and not listed[2]:
        raise _unlisted(kube.kubeconfig, missing)
    return listed


def _unlisted(kubeconfig: object, exc: Exception) -> InvalidInput:
    where = kubeconfig or "in-cluster"
    reason = " ".join(str(exc).split())
    return InvalidInput("--kubeconfig", f"cannot list Karmada Clusters via {where}: {reason}"[:400])


async def _collect_clusters(
    args: argparse.Namespace, cfg: Config
) -> tuple[list[Member], dict[str, str], dict[str, ZoneStatus]]:
    listed = await _list_clusters(args, cfg)
    found, skipped = members(cfg, *listed) if listed is not None else members(cfg, None)
    zones = sorted({m.zone for m in found if m.zone})
    statuses: dict[str, ZoneStatus] = {}
    if zones:
        feed = _feed(cfg, zones)
        statuses = {s.zone: s for s in await _collect(feed, zones)}
    return found, skipped, statuses


def run_clusters(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``carbonshift intensity --clusters``; returns the exit status."""
    from webhook.kube.reads import ClusterUnreachable  # noqa: PLC0415 - only with --clusters

    try:
        cfg = config_mod.load(args.config)
        found, skipped, statuses = asyncio.run(_collect_clusters(args, cfg))
    except (InvalidInput, ValueError) as exc:  # bad configuration or Redis URL
        err.write(config_mod.error_line(exc, args.config) + "\n")
        return 2
    except ClusterUnreachable as exc:  # the API server did not answer
        err.write(f"carbonshift: {exc}\n")
        return 1
    if _wants_json(args):
        rows = [_member_json(m, statuses.get(m.zone) if m.zone else None) for m in found]
        out.write(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        out.write(render_members(found, statuses))
    for name, why in skipped.items():
        what = {"liqo": "virtual node", "ocm": "ManagedCluster"}.get(name.split("/")[0], "Cluster")
        err.write(f"carbonshift intensity: {what} {name} left out: {why}\n")
    if not found:
        err.write(
            "carbonshift intensity: no member clusters: pass --kubeconfig (Karmada's API "
            "server) or list clusters under `clusters:` in --config.\n"
        )
        return 1
    unknown = [m.name for m in found if m.zone is None]
    missing = [m.name for m in found if m.zone and statuses[m.zone].reading is None]
    if unknown:
        err.write(
            f"carbonshift intensity: no grid zone for {', '.join(unknown)}: label the "
            "Cluster carbonshift.io/zone=<zone> or add it under `clusters:`.\n"
        )
    if missing:
        err.write(f"carbonshift intensity: no intensity data for {', '.join(missing)}.\n")
    return 1 if unknown or missing else 0


def _member_json(m: Member, status: ZoneStatus | None) -> dict[str, Any]:
    return {
        "cluster": m.name,
        "zone": m.zone,
        "zone_source": m.zone_source,
        "provider": m.provider,
        "region": m.region,
        "ready": m.ready,
        "intensity": _as_json(status) if status is not None else None,
    }


def render_members(found: Sequence[Member], statuses: Mapping[str, ZoneStatus]) -> str:
    """Aligned text table, one member cluster per line."""
    now = utcnow()
    header = ("CLUSTER", "ZONE", "ZONE FROM", "PROVIDER", "REGION", "GCO2EQ/KWH", "SOURCE", "AGE")
    rows = [header]
    for m in found:
        status = statuses.get(m.zone) if m.zone else None
        r = status.reading if status is not None else None
        rows.append(
            (
                m.name,
                m.zone or "-",
                m.zone_source,
                m.provider or "-",
                m.region or "-",
                f"{r.value:.1f}" if r else "-",
                (r.source + (" (STALE)" if r.stale else "")) if r else "(no data)",
                _age(r.age_seconds(now)) if r else "-",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    return "\n".join(lines) + "\n"


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
    """``carbonshift intensity`` on its own."""
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
    parser = argparse.ArgumentParser(prog="carbonshift")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["intensity", *(argv if argv is not None else sys.argv[1:])])
    status: int = args.handler(args)
    return status
