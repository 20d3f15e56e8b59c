"""What ``carbonshift explain`` says about one live object, as data and as text (the
command itself, its arguments and its reads, is :mod:`webhook.cli.explain`). Pure: the
object, its Events, the fleet and the config in, the explanation out."""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from webhook.decision import follow, reason
from webhook.decision.karpenter.nodepool_step import paused
from webhook.decision.liqo.peers import REMOTE_ID_LABEL
from webhook.decision.quantity import quantity
from webhook.decision.reapply import where
from webhook.decision.record import Record, switches, user_fields
from webhook.kinds import Kind
from webhook.model import vocabulary
from webhook.model.config import Config
from webhook.model.objects import dig, meta_of
from webhook.model.vocabulary import DECISION, INTENSITY_CLASS, INTENSITY_VALUE, REASON

EVENTS_SHOWN = 10
"""The newest Events shown."""


# --- what is said -----------------------------------------------------------------------------


def explain(
    obj: Mapping[str, Any],
    row: Kind,
    *,
    events: Sequence[Mapping[str, Any]],
    clusters: Sequence[Mapping[str, Any]],
    nodes: Sequence[Mapping[str, Any]],
    config: Config,
    now: datetime.datetime,
) -> dict[str, Any]:
    """Everything the command prints, as data (``-o json`` prints it as it is)."""
    meta = meta_of(obj)
    annotations = meta.annotations
    record = Record.decode(annotations.get(DECISION))
    said = annotations.get(REASON) or reason.line(row.kind, record)
    body = record.body
    doc: dict[str, Any] = {
        "object": {"kind": row.kind, "namespace": meta.namespace or None, "name": meta.name},
        "why": said,
        "decided": {
            "at": record.at,
            "provider": body.get("provider"),
            "since": record.since,
        },
    }
    if row.kind == "NodePool":
        doc["grid"] = {k: body.get(k) for k in ("zone", "g", "class")}
    else:
        doc["clusters"] = _clusters(record, row, clusters, nodes)
    doc["next"] = _next(obj, row, record, config, now)
    doc["ownership"] = _ownership(obj, row, record)
    doc["left"] = record.left
    doc["events"] = _events(events, row, meta.name, meta.namespace)
    doc["switches"] = switches(record)
    return doc


def _clusters(
    record: Record,
    row: Kind,
    clusters: Sequence[Mapping[str, Any]],
    nodes: Sequence[Mapping[str, Any]],
) -> list[dict[str, Any]]:
    """Each cluster the record weighed, with what the fleet says of it now."""
    if row.kind == "NamespaceOffloading":
        live = {meta_of(n).labels.get(REMOTE_ID_LABEL): n for n in nodes}
    else:
        live = {meta_of(c).name: c for c in clusters}
    found = record.body.get(reason.EXCLUDED)
    excluded = set(found.get("names") or ()) if isinstance(found, Mapping) else set()
    out = []
    for name, facts in record.clusters.items():
        entry = record.entries.get(name)
        now = live.get(name)
        mark = meta_of(now).annotations.get(INTENSITY_VALUE) if now is not None else None
        out.append({
            "name": name,
            "zone": facts.zone,
            "g": facts.intensity,
            "estimated": bool(entry.get("est")) if isinstance(entry, Mapping) else False,
            "tier": facts.tier,
            "weight": facts.weight,
            "excluded": name in excluded,
            "now": {
                "g": float(q) if (q := quantity(mark)) is not None else None,
                "class": meta_of(now).labels.get(INTENSITY_CLASS) if now is not None else None,
                "room": _room(now),
            },
        })  # fmt: skip
    return sorted(
        out,
        key=lambda c: (c["tier"] is None, c["tier"] or 0, c["g"] is None, c["g"] or 0.0, c["name"]),
    )


def _room(cluster: Mapping[str, Any] | None) -> str | None:
    """Free CPU of a Karmada Cluster's ``status.resourceSummary`` (``3.5 of 4 cpu``)."""
    if cluster is None:
        return None
    summary = dig(cluster, "status", "resourceSummary")
    total = quantity(dig(summary, "allocatable", "cpu"))
    if total is None:
        return None
    used = sum(
        (quantity(dig(summary, part, "cpu")) or 0 for part in ("allocated", "allocating")),
        start=quantity("0") or 0,
    )
    return f"{_number(float(total - used))} of {_number(float(total))} cpu free"


def _number(value: float) -> str:
    return f"{value:.0f}" if value.is_integer() else f"{value:.2f}".rstrip("0")


def _next(
    obj: Mapping[str, Any], row: Kind, record: Record, config: Config, now: datetime.datetime
) -> list[str]:
    """What would change the object next, and when (the leader's rules under ``config``)."""
    out: list[str] = []
    settings = config.reevaluate
    if row.following is None or not settings.enabled:
        out.append(
            "the leader does not re-evaluate it (reevaluate.enabled is false): only a new "
            f"{vocabulary.REFRESH} value decides again"
        )
        return out
    earliest = now
    last = follow.last_write(obj, record)
    if last is not None:
        ready = last + datetime.timedelta(seconds=settings.min_interval_seconds)
        limit = f"reevaluate.min_interval_seconds {settings.min_interval_seconds:g}"
        if ready > now:
            out.append(f"min interval: no rewrite before {_time(ready)} ({limit})")
            earliest = max(earliest, ready)
        else:
            out.append(f"min interval: passed at {_time(ready)} ({limit})")
    if row.kind == "NodePool":
        out += _next_pool(obj, record, now)
    else:
        rule = config.hysteresis
        since = record.since
        if since is not None and rule.dwell_hours > 0:
            try:
                end = vocabulary.parse_time(since) + datetime.timedelta(hours=rule.dwell_hours)
            except ValueError:
                end = None
            if end is not None and end > now:
                out.append(
                    f"dwell: the placement in force since {since} stays until {_time(end)} "
                    f"(hysteresis.dwell_hours {rule.dwell_hours:g})"
                )
                earliest = max(earliest, end)
            elif end is not None:
                out.append(f"dwell: passed at {_time(end)} (in force since {since})")
        ranking = (
            "current intensity (reevaluate.forecast none)"
            if settings.forecast == "none"
            else f"the 24 h forecast mean (reevaluate.forecast {settings.forecast})"
        )
        out.append(
            f"margin: a new placement replaces it only when its expected intensity is more "
            f"than {rule.margin:.0%} lower (hysteresis.margin), ranked on {ranking}"
        )
        out.append(f"earliest switch: {_time(earliest)}, at a leader pass (every "
                   f"{settings.interval_seconds:g} s)")  # fmt: skip
        if record.body.get("lazy"):
            out.append("Karmada applies a new placement only when the resource template changes")
    if user_fields(record):
        out.append("the fields the user took back are never written again")
    return out


def _next_pool(obj: Mapping[str, Any], record: Record, now: datetime.datetime) -> list[str]:
    knobs = vocabulary.knobs(meta_of(obj).annotations, "nodepool")
    limit = knobs.max_pause
    out = []
    if paused(obj):
        started = record.body.get("paused_at") or record.at
        try:
            end = vocabulary.parse_time(str(started)) + limit if started else None
        except ValueError:
            end = None
        when = f" at the latest at {_time(end)}" if end is not None else ""
        out.append(
            f"the pause ends at the forecast's cleaner hour,{when} (max-pause "
            f"{_hours(limit)}), even on stale data; never too soon"
        )
    elif "pause" in knobs.strategies or "ladder" in knobs.strategies:
        out.append(
            "a pause starts when a cleaner hour is forecast within max-pause "
            f"({_hours(limit)}), or without a forecast when the grid turns high"
        )
    if "weight" in knobs.strategies:
        out.append("spec.weight follows the local grid's greenness at every leader pass")
    if not out:
        out.append("the pool's strategies change nothing over time (its template is kept)")
    return out


def _hours(value: datetime.timedelta) -> str:
    minutes = int(value.total_seconds() // 60)
    hours, rest = divmod(minutes, 60)
    return f"{hours}h{rest}m" if rest else f"{hours}h"


def _time(at: datetime.datetime) -> str:
    return vocabulary.format_time(at)


def _ownership(obj: Mapping[str, Any], row: Kind, record: Record) -> list[dict[str, Any]]:
    """Who owns each field carbonshift wrote, from the record's ``own`` and ``user``."""
    fields = row.following.fields if row.following is not None else {}
    out = []
    for key in sorted(record.own):
        path = where(key, fields)
        current = dig(obj, *path) if path is not None else None
        mine = record.owns(key, current)
        out.append({
            "field": ".".join(path) if path is not None else key,
            "owner": "carbonshift" if mine else "user",
            "note": _owned(record.orig.get(key)) if mine else
            "edited since carbonshift wrote it: the leader releases it",
            "original": record.orig.get(key),
        })  # fmt: skip
    for key in user_fields(record):
        path = where(key, fields)
        out.append({
            "field": ".".join(path) if path is not None else key,
            "owner": "user",
            "note": "taken back by the user: never written again",
            "original": None,
        })  # fmt: skip
    return out


def _owned(original: object) -> str:
    if original is None:
        return "as carbonshift wrote it"
    text = _compact(original)
    text = text if len(text) <= 60 else text[:59] + "…"
    return f"carbonshift's, in place of the user's {text} (kept in the record)"


def _events(
    events: Sequence[Mapping[str, Any]], row: Kind, name: str, namespace: str
) -> list[dict[str, Any]]:
    """carbonshift's Events about the object (reason ``Carbon*`` or the kind's), newest last."""
    out: list[dict[str, Any]] = []
    for event in events:
        about = event.get("regarding")
        if not isinstance(about, Mapping):
            continue
        if about.get("kind") != row.kind or about.get("name") != name:
            continue
        if (about.get("namespace") or "") != (namespace or ""):
            continue
        why = str(event.get("reason") or "")
        if not (why.startswith("Carbon") or why in row.events):
            continue
        when = (
            event.get("eventTime")
            or event.get("deprecatedLastTimestamp")
            or dig(event, "metadata", "creationTimestamp")
        )
        out.append({"time": str(when or ""), "type": event.get("type"), "reason": why,
                    "note": event.get("note")})  # fmt: skip
    return sorted(out, key=lambda e: str(e["time"]))[-EVENTS_SHOWN:]


# --- text -------------------------------------------------------------------------------------


def render(doc: Mapping[str, Any]) -> str:
    """The text the command prints."""
    o = doc["object"]
    where_ = f"{o['namespace']}/{o['name']}" if o["namespace"] else o["name"]
    lines = [f"{o['kind']} {where_}", f"  why: {doc['why']}"]
    decided = doc["decided"]
    if decided["at"]:
        by = f" ({decided['provider']})" if decided["provider"] else ""
        lines.append(f"  decided on data of {decided['at']}{by}")
    if "grid" in doc:
        g = doc["grid"]
        lines.append(f"  local grid: {g['zone']} {reason.grams(g['g'])} ({g['class']})")
    if doc.get("clusters"):
        lines.append("  clusters (as recorded at the decision; now: what the fleet says):")
        rows = [("CLUSTER", "ZONE", "DECIDED ON", "PLACED", "NOW", "CLASS", "ROOM")]
        for c in doc["clusters"]:
            placed = (
                "excluded" if c["excluded"]
                else f"tier {c['tier']}" if c["tier"] is not None
                else f"weight {c['weight']}" if c["weight"] is not None
                else "-"
            )  # fmt: skip
            decided_on = reason.grams(c["g"]) + (" (est.)" if c["estimated"] else "")
            now = c["now"]
            rows.append((
                c["name"], c["zone"] or "-", decided_on, placed,
                reason.grams(now["g"]) if now["g"] is not None else "-",
                now["class"] or "-", now["room"] or "-",
            ))  # fmt: skip
        lines += _table(rows)
    if doc["left"]:
        lines.append("  left alone:")
        lines += [f"    {x.get('rule')}: {x.get('reason')}" for x in doc["left"]]
    lines.append("  next:")
    lines += [f"    {n}" for n in doc["next"]]
    if doc["ownership"]:
        lines.append("  fields:")
        for f in doc["ownership"]:
            lines.append(f"    {f['field']}: {f['owner']} ({f['note']})")
    if doc["switches"]:
        lines.append("  switches (last 5):")
        for s in doc["switches"]:
            lines.append(f"    {s.get('t')}: {_switch(s)}")
    lines.append("  events:" if doc["events"] else "  events: none")
    for e in doc["events"]:
        lines.append(f"    {e['time']} {e['type']} {e['reason']}: {e['note']}")
    return "\n".join(lines) + "\n"


def _switch(entry: Mapping[str, Any]) -> str:
    parts = []
    if "pause" in entry:
        parts.append(str(entry["pause"]))
    if "before" in entry or "after" in entry:
        parts.append(f"{entry.get('before')} -> {entry.get('after')} g expected")
    if "from" in entry or "to" in entry:
        parts.append(f"{_compact(entry.get('from'))} -> {_compact(entry.get('to'))}")
    return ", ".join(parts) or _compact(entry)


def _compact(value: object) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["    " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
            for r in rows]  # fmt: skip
