"""What the API server dropped of a placement carbonshift wrote.

An API server whose policy CRDs have no ``overflowAffinities`` (Karmada before v1.18,
:mod:`webhook.decision.karmada.api`) prunes them from the ordered fill's one term: the
stored policy keeps the greenest tier alone, and the value differs from the fingerprint
carbonshift recorded (``own``). Read as a user edit, the field would be released and
never written again. :func:`dropped` tells the two apart: it rebuilds the overflow tiers
from the decision record (each cluster's tier ``t``) onto the stored term and checks that
the result is exactly what carbonshift wrote (the recorded fingerprint). A match is the
API server's doing, never a user's: the field stays carbonshift's
(:func:`still_owned`) and the placement is decided again in a shape the API keeps.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.decision.karmada.terms import GREEN_TERM, OTHERS_TERM, OWN, SELECTOR_KEYS, TIER_TERM
from webhook.decision.record import Record, fingerprint
from webhook.model.objects import items

AFFINITIES = OWN + "clusterAffinities"
"""The record key of the field whose ``overflowAffinities`` an older API drops."""

OVERFLOW = "overflowAffinities"


def dropped(placement: Mapping[str, Any], previous: Record) -> dict[str, str]:
    """Record keys of the fields carbonshift wrote that the API server stored with a part
    dropped -> what it dropped (empty: none; an edit by someone else is not a drop)."""
    mark = previous.own.get(AFFINITIES)
    current = placement.get("clusterAffinities")
    if mark is None or not isinstance(current, list) or len(current) != 1:
        return {}  # cheap checks first: the leader asks this of every managed policy
    term = current[0]
    if not isinstance(term, Mapping) or term.get("affinityName") != GREEN_TERM:
        return {}
    if OVERFLOW in term or fingerprint(current) == mark:
        return {}
    for rebuilt in _written(term, previous):
        if fingerprint([rebuilt]) == mark:
            return {AFFINITIES: OVERFLOW}
    return {}


def _written(term: Mapping[str, Any], previous: Record) -> list[dict[str, Any]]:
    """The terms carbonshift may have written for the stored ``term``: with the overflow
    tiers the record names, then with an open selection's last tier too."""
    tiers: dict[int, list[str]] = {}
    for name, facts in previous.clusters.items():
        if facts.tier is not None:
            tiers.setdefault(facts.tier, []).append(name)
    selectors = {k: term[k] for k in SELECTOR_KEYS if term.get(k)}
    overflow: list[dict[str, Any]] = [
        {"affinityName": f"{TIER_TERM}{k}", **selectors, "clusterNames": sorted(names)}
        for k, names in sorted(tiers.items())
        if k > 0
    ]
    named = {n for names in tiers.values() for n in names} | set(items(selectors, "exclude"))
    others = {"affinityName": OTHERS_TERM, **selectors, "exclude": sorted(named)}
    out = [{**term, OVERFLOW: [*overflow, others]}]
    if overflow:
        out.insert(0, {**term, OVERFLOW: overflow})
    return out


def still_owned(previous: Record, placement: Mapping[str, Any], keys: Mapping[str, str]) -> Record:
    """``previous`` owning what the API server stored of ``keys`` (so the decision starts
    again from the user's values), without ``since``: a placement the API server cut was
    never in force as decided, and no hysteresis holds it."""
    own = dict(previous.own)
    for key in keys:
        own[key] = fingerprint(placement.get(key[len(OWN) :]))
    body = {k: v for k, v in previous.body.items() if k != "since"}
    return Record(body=body, orig=dict(previous.orig), own=own)
