"""Liqo ``NamespaceOffloading`` (``offloading.liqo.io/v1beta1``): offload to green peers.

Liqo offloads the pods of a namespace to the remote clusters whose virtual nodes match
the object's ``spec.clusterSelector`` (a core ``NodeSelector``: terms ORed, each term's
``matchExpressions`` ANDed, matched against the virtual nodes' labels; absent: every
remote cluster). carbonshift narrows it to the green remote clusters the user's selector
already allows, and never widens it: every user term is kept and gets one more
expression, ``liqo.io/remote-cluster-id In [<green ids>]`` (no user selector: one term
with that expression alone).

Green: the allowed remote clusters (:mod:`webhook.decision.liqo.peers`, grid zones resolved as
Karmada Clusters') of the best intensity class present (``low`` first; the thresholds of
the ``carbonshift.io/intensity`` labels), or, with ``carbonshift.io/max-intensity`` on
the object, those within that limit (:func:`~webhook.decision.ranking.within_limit`:
the greenest stays when all are above it). Remote clusters without intensity data are
not chosen; with no data at all, or no remote cluster the selector allows, the selector
is left as it is (``left`` in the decision record, and a warning).

Ownership is the placement's (:mod:`webhook.decision.record`): the record keeps the
user's selector (``orig``) and a fingerprint of what carbonshift wrote (``own``); a
selector edited since belongs to the user again. A new green set replaces the one in
force only under the hysteresis rule (:func:`webhook.decision.hysteresis.judge`: dwell,
and greener by more than the margin). Only an object named ``offloading`` is decided
(Liqo ignores any other), and ``podOffloadingStrategy: Local`` offloads nothing.
Changing ``clusterSelector`` affects pods created afterwards (Liqo's pod webhook).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from webhook.decision.hysteresis import NO_HYSTERESIS, Held, Hysteresis, Verdict, judge
from webhook.decision.labels import RANK, Rule
from webhook.decision.liqo.peers import REMOTE_ID_LABEL
from webhook.decision.outcome import Change, Decision, lookup, short
from webhook.decision.ranking import intensity_class, order_greenest, within_limit
from webhook.decision.reason import EXCLUDED
from webhook.decision.record import Record, fingerprint, history, user_view
from webhook.decision.selectors import SelectorError, labels_match
from webhook.model import vocabulary
from webhook.model.config import ClusterConfig
from webhook.model.intensity import IntensityTable
from webhook.model.objects import Obj, items, mapping
from webhook.model.vocabulary import DECISION

NAME = "offloading"
"""Liqo reads only the NamespaceOffloading of this name (``DefaultNamespaceOffloadingName``)."""
OWN = "offloading."
"""Record key prefix of the fields carbonshift owns in ``spec``."""
FIELDS: Mapping[str, tuple[str, ...]] = {OWN: ("spec",)}
"""Record key prefix -> where those fields live (the re-evaluation's ``fields``)."""
SELECTOR = "clusterSelector"


@dataclasses.dataclass(frozen=True, slots=True)
class OffloadingInputs:
    """Everything a decision reads besides the object."""

    peers: Mapping[str, ClusterConfig]
    """The remote clusters by cluster id: grid zone and their virtual nodes' labels."""
    table: IntensityTable
    rule: Rule
    """The intensity class thresholds (those of the ``carbonshift.io/intensity`` labels)."""
    hysteresis: Hysteresis = NO_HYSTERESIS
    now: datetime | None = None
    """For the dwell (None: no hysteresis, the green set is always taken)."""


def _terms(selector: object) -> list[dict[str, Any]]:
    """The user's terms (an absent or empty selector: one term that matches everything)."""
    if selector is None:
        return [{}]
    if not isinstance(selector, Mapping):
        raise SelectorError("clusterSelector must be an object")
    terms = selector.get("nodeSelectorTerms")
    if not terms:
        return [{}]
    if not isinstance(terms, list) or not all(isinstance(t, Mapping) for t in terms):
        raise SelectorError("nodeSelectorTerms must be a list of objects")
    for term in terms:
        if term.get("matchFields"):
            raise SelectorError("matchFields (virtual node names) are not judged")
    return [dict(t) for t in terms]


def allowed(selector: object, peers: Mapping[str, ClusterConfig]) -> list[str]:
    """The remote cluster ids whose virtual node labels ``selector`` matches (sorted)."""
    terms = _terms(selector)
    found = []
    for cluster_id, peer in sorted(peers.items()):
        labels = {**peer.labels, REMOTE_ID_LABEL: cluster_id}
        if any(
            labels_match({"matchExpressions": t.get("matchExpressions")}, labels) for t in terms
        ):
            found.append(cluster_id)
    return found


def narrowed(selector: object, green: list[str]) -> dict[str, Any]:
    """``selector`` with every term ANDed with ``remote-cluster-id In green``."""
    only = {"key": REMOTE_ID_LABEL, "operator": "In", "values": sorted(green)}
    terms = []
    for term in _terms(selector):
        expressions = [*items(term, "matchExpressions"), only]
        terms.append({**term, "matchExpressions": expressions})
    return {"nodeSelectorTerms": terms}


def green(intensities: Mapping[str, float | None], rule: Rule, limit: float | None) -> list[str]:
    """The green clusters among those with a known intensity (see the module doc)."""
    known = {n: v for n, v in intensities.items() if v is not None}
    if not known:
        return []
    if limit is not None:
        kept, _ = within_limit(dict(known), limit)
        return sorted(kept)
    classes = {
        n: intensity_class(v, low_below=rule.low_below, high_from=rule.high_from)
        for n, v in known.items()
    }
    best = min(RANK[c] for c in classes.values())
    return sorted(n for n, c in classes.items() if RANK[c] == best)


def _left(decision: Decision, why: str, previous: Record) -> Decision:
    decision.skipped = why
    decision.warnings.append(short(f"carbonshift: {why}"))
    body = {**previous.body, "left": [{"rule": SELECTOR, "reason": why}]}
    decision.record = Record(body=body, orig=previous.orig, own=previous.own)
    return decision


def decide(obj: Mapping[str, Any], inputs: OffloadingInputs) -> Decision:
    """Decide the ``clusterSelector`` of a NamespaceOffloading object."""
    view = Obj(obj)
    annotations, spec = view.meta.annotations, view.spec
    decision = Decision()
    if view.meta.name != NAME:
        decision.skipped = f"Liqo reads only the NamespaceOffloading named {NAME}"
        return decision
    if spec.get("podOffloadingStrategy") == "Local":
        decision.skipped = "podOffloadingStrategy Local: nothing is offloaded"
        return decision
    previous = Record.decode(annotations.get(DECISION))
    base = user_view(spec, previous, OWN)
    knobs = vocabulary.knobs(annotations, "policy")
    decision.warnings.extend(vocabulary.warning(p) for p in knobs.problems)
    try:
        candidates = allowed(base.get(SELECTOR), inputs.peers)
    except SelectorError as exc:
        return _left(decision, f"clusterSelector left as is: {exc}", previous)
    if not candidates:
        return _left(decision, "clusterSelector allows no known remote cluster", previous)
    data = lookup({n: inputs.peers[n].grid_zone for n in candidates}, inputs.table)
    decision.warnings.extend(data.warnings())
    chosen = green(data.values, inputs.rule, knobs.max_intensity)
    if not chosen:
        return _left(decision, "no intensity data for the remote clusters yet", previous)
    new = narrowed(base.get(SELECTOR), chosen)
    weights = {n: int(n in chosen) for n in candidates}
    current = spec.get(SELECTOR)
    kept = _held(previous, current, weights, data.values, inputs)
    if kept is not None:
        decision.warnings.append(kept)
        decision.record = previous
        return decision
    body = data.body(weights)
    if knobs.max_intensity is not None:
        values = data.values
        out = [n for n in order_greenest(values) if n not in chosen and values[n] is not None]
        if out:
            body[EXCLUDED] = {"max": knobs.max_intensity, "names": out}
    body["since"] = (new == current and previous.since) or body["at"]
    record = Record(body=body | history(previous))
    key = OWN + SELECTOR
    record.orig[key] = base.get(SELECTOR)
    record.own[key] = fingerprint(new)
    decision.record = record
    if new != current:
        decision.changes.append(Change(("spec", SELECTOR), new))
    return decision


def _held(
    previous: Record,
    current: object,
    proposed: Mapping[str, int],
    intensities: Mapping[str, float | None],
    inputs: OffloadingInputs,
) -> str | None:
    """Why the green set in force stays (hysteresis), or None when the proposal is taken.

    Only a selector carbonshift itself wrote (recorded ``since``, still as written) is
    held; user edits and first decisions always go through."""
    since = previous.since
    if inputs.now is None or since is None:
        return None
    if not previous.owns(OWN + SELECTOR, current):
        return None
    try:
        started = vocabulary.parse_time(since).timestamp() / 3600
    except ValueError:
        return None
    recorded = mapping(previous.body, "clusters")
    weights = {n: c.get("w") for n, c in recorded.items() if isinstance(c, dict)}
    held = {n: w for n, w in weights.items() if isinstance(w, int) and w > 0}
    wanted = {n: w for n, w in proposed.items() if w > 0}
    rule, now = inputs.hysteresis, inputs.now.timestamp() / 3600
    verdict = judge(rule, Held(held, started) if held else None, wanted, intensities, now)
    if verdict is Verdict.DWELL:
        hours = now - started
        return (
            f"carbonshift: clusterSelector kept: in force {hours:.1f} h of {rule.dwell_hours:g} h"
        )
    if verdict is Verdict.MARGIN:
        return f"carbonshift: clusterSelector kept: new one is not {rule.margin:.0%} greener"
    return None
