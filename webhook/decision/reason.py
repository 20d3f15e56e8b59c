"""The decision record in words: the ``carbonshift.io/reason`` annotation.

The decision annotation (:mod:`webhook.decision.record`) is compact JSON for carbonshift
to read back. Beside it carbonshift writes one short line a person reads in
``kubectl get -o yaml`` or ``kubectl describe``::

    ordered fill: member-se (23 g) first, then member-fr (31 g);
    member-pl excluded: 565 g above max-intensity 500; in force since 2026-01-01T12:00:00Z

(one line; wrapped here).
The line is a pure function of the record (:func:`line`): every writer of a record
(admission, the leader's re-evaluation, the re-apply step that puts a record back) writes
the line of the record it writes, so the two never disagree, and an unchanged record
gives the same line. What the record holds for it: each cluster's intensity (``g``),
tier (``t``) or weight (``w``); what ``max-intensity`` excluded (:data:`EXCLUDED`); a
NodePool's weight (:data:`WEIGHT`) and why its limits are held below the user's
(:data:`WHY`, with ``paused``, ``paused_at`` and ``step``); the rules left unapplied
(``left``), the keys not read (``keys``), the fields a user took back (``user``), and
since when the placement is in force (``since``: a recomputed placement replaces it only
after the dwell and when it is greener by the margin).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from webhook.decision.ranking import CEILING
from webhook.decision.record import USER, ClusterFacts, Record, user_fields

EXCLUDED = "excluded"
"""Record body key: ``{"max": G, "names": [...]}``, the candidates ``carbonshift.io/max-intensity``
left out (greenest first) and the limit in gCO2eq/kWh."""
WEIGHT = "weight"
"""Record body key (NodePools): the ``spec.weight`` carbonshift wrote (strategy ``weight``)."""
WHY = "why"
"""Record body key (NodePools): why ``spec.limits`` are held below the user's (a pause or a
ladder step)."""
LIMIT = 300
"""The longest line written (characters); a longer one ends with ``…``."""

_POLICIES = ("PropagationPolicy", "ClusterPropagationPolicy")


def line(kind: str, record: Record) -> str:
    """The record of an object of ``kind`` in one short sentence (module doc)."""
    body = record.body
    if kind == "NodePool" or (kind not in _POLICIES and "class" in body and "clusters" not in body):
        parts = _nodepool(body)
    elif kind == "NamespaceOffloading":
        parts = _offloading(record)
    else:
        parts = _policy(record)
    parts += _notes(record)
    text = "; ".join(p for p in parts if p) or "decided by carbonshift"
    text = " ".join(text.split())  # one line, whatever a reason held
    return text if len(text) <= LIMIT else text[: LIMIT - 1] + "…"


def grams(value: float | None) -> str:
    """An intensity as the line shows it: ``23 g``, or ``no data``."""
    return "no data" if value is None else f"{value:.0f} g"


def _named(name: str, facts: ClusterFacts) -> str:
    return f"{name} ({grams(facts.intensity)})"


def _excluded(
    body: Mapping[str, Any], clusters: Mapping[str, ClusterFacts], verb: str = "excluded"
) -> list[str]:
    found = body.get(EXCLUDED)
    if not isinstance(found, Mapping):
        return []
    limit, names = found.get("max"), found.get("names")
    if not isinstance(names, list) or not names:
        return []
    bound = f"{limit:g}" if isinstance(limit, int | float) else "?"
    out = []
    for name in names:
        facts = clusters.get(str(name), ClusterFacts())
        out.append(f"{name} {verb}: {grams(facts.intensity)} above max-intensity {bound}")
    return out


def _policy(record: Record) -> list[str]:
    clusters = record.clusters
    body = record.body
    excluded = body.get(EXCLUDED)
    out_names = set(excluded.get("names") or ()) if isinstance(excluded, Mapping) else set()
    placed = {n: f for n, f in clusters.items() if n not in out_names}
    tiers: dict[int, list[str]] = {}
    for name, facts in placed.items():
        if facts.tier is not None:
            tiers.setdefault(facts.tier, []).append(name)
    parts: list[str] = []
    if tiers:
        steps = [
            " and ".join(_named(n, placed[n]) for n in sorted(tiers[k], key=_by(placed)))
            for k in sorted(tiers)
        ]
        head = f"ordered fill: {steps[0]} first"
        parts.append(head + "".join(f", then {s}" for s in steps[1:]))
    elif any(f.weight is not None for f in placed.values()):
        weighted = sorted((n for n in placed if placed[n].weight is not None), key=_by(placed))
        shown = [f"{n} {placed[n].weight} ({grams(placed[n].intensity)})" for n in weighted]
        text = "carbon weights: " + ", ".join(shown)
        others = body.get("others")
        if isinstance(others, Mapping) and isinstance(others.get("w"), int):
            text += f", other clusters {others['w']}"
        parts.append(text)
    elif placed:
        ranked = sorted(placed, key=_by(placed))
        parts.append("clusters by intensity: " + ", ".join(_named(n, placed[n]) for n in ranked))
    parts += _excluded(body, clusters)
    if body.get("lazy"):
        parts.append("Karmada applies it at the next template change (activationPreference Lazy)")
    return parts


def _offloading(record: Record) -> list[str]:
    clusters = record.clusters
    body = record.body
    chosen = sorted((n for n, f in clusters.items() if f.weight), key=_by(clusters))
    parts: list[str] = []
    if chosen:
        parts.append("offloads to " + ", ".join(_named(n, clusters[n]) for n in chosen))
    excluded = _excluded(body, clusters, "left out")
    named: set[str] = set()
    found = body.get(EXCLUDED)
    if isinstance(found, Mapping) and isinstance(found.get("names"), list):
        named = {str(n) for n in found["names"]}
    others = sorted(
        (n for n, f in clusters.items() if f.weight == 0 and n not in named), key=_by(clusters)
    )
    if others:
        shown = ", ".join(_named(n, clusters[n]) for n in others)
        parts.append(f"not offloaded to {shown}: not in the greenest intensity class present")
    return parts + excluded


def _nodepool(body: Mapping[str, Any]) -> list[str]:
    zone, g, level = body.get("zone"), body.get("g"), body.get("class")
    value = float(g) if isinstance(g, int | float) and not isinstance(g, bool) else None
    parts = [f"local grid {zone or 'unknown'} {grams(value)}" + (f" ({level})" if level else "")]
    label = body.get("label")
    if isinstance(label, Mapping) and label.get("class"):
        lg = label.get("g")
        lv = float(lg) if isinstance(lg, int | float) and not isinstance(lg, bool) else None
        parts.append(
            f"template label {label['class']} from its zones' grid {label.get('zone')} {grams(lv)}"
        )
    weight = body.get(WEIGHT)
    if isinstance(weight, int) and not isinstance(weight, bool):
        scale = f"100 at 0 g, 0 at {CEILING:.0f} g"
        parts.append(f"spec.weight {weight}: the grid's greenness at {grams(value)} ({scale})")
    if body.get("paused"):
        step = body.get("step")
        since = body.get("paused_at")
        if isinstance(step, int | float) and not isinstance(step, bool):
            what = f"limits.cpu held at {step:.0%} of the user's"
        else:
            what = 'paused: limits.cpu "0", no new nodes'
        if isinstance(since, str):
            what += f" since {since}"
        why = body.get(WHY)
        parts.append(f"{what}: {why}" if isinstance(why, str) and why else what)
    return parts


def _notes(record: Record) -> list[str]:
    """What every kind's line ends with: rules left alone, keys not read, fields the
    user took back, since when the placement is in force."""
    body = record.body
    parts = [
        f"{x.get('rule')} not applied: {x.get('reason')}" for x in record.left if x.get("rule")
    ]
    keys = body.get("keys")
    if isinstance(keys, Mapping) and keys:
        parts.append("ignored " + ", ".join(sorted(str(k) for k in keys)))
    users = user_fields(record) if USER in body else []
    if users:
        names = ", ".join(k.rsplit(".", 1)[-1] for k in users)
        parts.append(f"the user owns {names} (edited after carbonshift wrote it)")
    since = record.since
    if since is not None:
        parts.append(f"in force since {since}")
    return parts


def _by(clusters: Mapping[str, ClusterFacts]) -> Callable[[str], tuple[bool, float, str]]:
    """Sort key: greenest first, no data last, then by name."""

    def key(name: str) -> tuple[bool, float, str]:
        g = clusters[name].intensity
        return (g is None, g if g is not None else 0.0, name)

    return key
