"""The placement shapes carbonshift reads and writes in a Karmada policy.

The names of the terms it writes (the ordered fill's ``carbonshift-greenest`` and
``carbonshift-tier-N`` or ``carbonshift-group-N``, green-first's ``carbonshift-fallback``),
the clusters each of the user's terms selects, and how it writes terms, exclusions, weights
and the decision record.
Pure functions over the placement mapping; :mod:`webhook.decision.karmada.placement` decides which
to apply. How Karmada divides a placement (its division, static weights and their reach,
overflow, an open selection, the ordered fill's tiers) is read through
:class:`webhook.decision.karmada.view.PlacementView`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from webhook.decision.karmada.view import GREEN_TERM as GREEN_TERM  # noqa: PLC0414 - callers import it here
from webhook.decision.karmada.view import GROUP_TERM as GROUP_TERM  # noqa: PLC0414 - callers import it here
from webhook.decision.karmada.view import OTHERS_TERM as OTHERS_TERM  # noqa: PLC0414 - callers import it here
from webhook.decision.karmada.view import Tiers as Tiers  # noqa: PLC0414 - callers import it here
from webhook.decision.karmada.view import fill_of, green_terms, group_index
from webhook.decision.karmada.view import group_name as group_name  # noqa: PLC0414 - callers import it here
from webhook.decision.outcome import REMOVE, Change
from webhook.decision.ranking import order_greenest
from webhook.decision.record import Record, fingerprint
from webhook.decision.selectors import SelectorError, allowed_clusters, is_open
from webhook.model.config import ClusterConfig
from webhook.model.objects import items, mapping

FALLBACK_TERM = "carbonshift-fallback"

TIER_TERM = "carbonshift-tier-"
"""Overflow tiers of the ordered fill: ``carbonshift-tier-1``, ``-2``... (greenest first)."""

FILL = "ordered fill"

TIER_DEPTH = 10
"""Tiers the hysteresis tells apart in an ordered fill
(:func:`webhook.decision.karmada.holding.in_force`)."""

OWN = "placement."
"""Decision record key prefix of the placement fields carbonshift owns."""

SELECTOR_KEYS = ("labelSelector", "fieldSelector", "exclude")

ROUND_KEY = "round"
"""Decision record key: the failover groups' naming round (absent: 0), bumped by the
leader's move back (:func:`regrouped`)."""


def fill_order(intensities: Mapping[str, float | None], first: int | None = None) -> Tiers:
    """Candidates in tiers, greenest first; equally green clusters share a tier.

    ``first``: the greenest ``first`` clusters share the first tier (``max-clusters``).
    Clusters of unknown intensity come last, together.
    """
    order = order_greenest(intensities)
    tiers: Tiers = [order[:first]] if first else []
    joins = not first  # the max-clusters tier takes no equally green cluster after it
    last: float | None = None  # the intensity of the cluster placed before
    for name in order[len(tiers[0]) if tiers else 0 :]:
        value = intensities[name]
        if joins and tiers and value == last:
            tiers[-1].append(name)
        else:
            tiers.append([name])
            joins = True
        last = value
    return [t for t in tiers if t]


def fill_tiers(placement: Mapping[str, Any]) -> Tiers | None:
    """The ordered-fill tiers carbonshift wrote into a placement (named clusters only);
    None when the placement is not an ordered fill (:attr:`PlacementView.fill_tiers`)."""
    return green_terms(placement)[0]


def selected_groups(
    placement: Mapping[str, Any],
    known: Mapping[str, ClusterConfig],
    reach: Sequence[Mapping[str, Any]] | None,
) -> list[list[str]]:
    """The candidates of each affinity term (with its overflow), or of the one affinity.

    Only clusters within the user's static weights' reach, when there are any.
    Empty when no candidate has a user weight.
    """
    terms = placement.get("clusterAffinities")
    if terms:
        if not isinstance(terms, list) or not all(isinstance(t, dict) for t in terms):
            raise SelectorError("clusterAffinities must be a list of objects")
        groups = [
            sorted({n for a in (t, *overflow(t)) for n in allowed_clusters(a, known)})
            for t in terms
        ]
    else:
        groups = [allowed_clusters(placement.get("clusterAffinity"), known)]
    if reach is None:
        return groups
    within = {n for target in reach for n in allowed_clusters(target, known)}
    if within.isdisjoint(n for g in groups for n in g):
        return []  # the weights may name clusters carbonshift does not know: leave it
    # A term none of whose clusters has a weight gives each of them weight 1 (Karmada).
    return [[n for n in g if n in within] or g for g in groups]


def overflow(term: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    extra = term.get("overflowAffinities")
    if extra is None:
        return []
    if not isinstance(extra, list) or not all(isinstance(o, dict) for o in extra):
        raise SelectorError("overflowAffinities must be a list of objects")
    return extra


def unweighted_terms(
    placement: Mapping[str, Any],
    known: Mapping[str, ClusterConfig],
    reach: Sequence[Mapping[str, Any]] | None,
) -> list[dict[str, Any]]:
    """The selectors of open user terms whose known clusters have no user static weight."""
    terms = placement.get("clusterAffinities")
    if reach is None or not isinstance(terms, list):
        return []
    within = {n for target in reach for n in allowed_clusters(target, known)}
    out = []
    for term in terms:
        open_ = isinstance(term, dict) and is_open(term)
        if open_ and within.isdisjoint(allowed_clusters(term, known)):
            keys = (*SELECTOR_KEYS, "clusterNames")
            out.append({k: term[k] for k in keys if term.get(k)})
    return out


def named(placement: Mapping[str, Any]) -> list[str]:
    """The clusters the user's ``clusterAffinity`` names, minus its ``exclude``."""
    affinity = placement.get("clusterAffinity")
    if not isinstance(affinity, Mapping):
        return []
    names, out = affinity.get("clusterNames"), set(items(affinity, "exclude"))
    return (
        [n for n in names if isinstance(n, str) and n not in out] if isinstance(names, list) else []
    )


def exclude(placement: dict[str, Any], names: list[str]) -> None:
    def without(affinity: Mapping[str, Any]) -> dict[str, Any]:
        return {**affinity, "exclude": sorted(set(items(affinity, "exclude")) | set(names))}

    terms = placement.get("clusterAffinities")
    if terms:
        out = []
        for term in terms:
            changed = without(term)
            if changed.get("overflowAffinities"):
                changed["overflowAffinities"] = [without(o) for o in changed["overflowAffinities"]]
            out.append(changed)
        placement["clusterAffinities"] = out
        return
    placement["clusterAffinity"] = without(mapping(placement, "clusterAffinity"))


def green_first_terms(
    placement: Mapping[str, Any], green: list[str], rest: list[str], *, opened: bool
) -> list[dict[str, Any]]:
    """Ordered terms: the greenest, then the fallback, each keeping the user's selectors.

    The fallback is ``rest`` by name when the user named the clusters; for an open
    selection it is the user's selection itself (no names), so clusters carbonshift does
    not know still match. The user's own terms (override) follow the greenest one as they
    are.
    """
    terms = placement.get("clusterAffinities")
    if terms:
        first = {"affinityName": GREEN_TERM, "clusterNames": green}
        return [first, *(t for t in terms if t.get("affinityName") != GREEN_TERM)]
    affinity = mapping(placement, "clusterAffinity")
    selectors = {k: affinity[k] for k in SELECTOR_KEYS if affinity.get(k)}
    out = [{"affinityName": GREEN_TERM, **selectors, "clusterNames": green}]
    if opened:
        out.append({"affinityName": FALLBACK_TERM, **selectors})
    elif rest:
        out.append({"affinityName": FALLBACK_TERM, **selectors, "clusterNames": rest})
    return out


def dynamic(scheduling: object) -> dict[str, Any]:
    """Divided by available replicas (the user's Aggregated division stays: it overflows too)."""
    out = dict(scheduling) if isinstance(scheduling, dict) else {}
    out["replicaSchedulingType"] = "Divided"
    if out.get("replicaDivisionPreference") == "Aggregated":
        out.pop("weightPreference", None)
        return out
    out["replicaDivisionPreference"] = "Weighted"
    out["weightPreference"] = {"dynamicWeight": "AvailableReplicas"}
    return out


def weighted(
    scheduling: object,
    weights: Mapping[str, int],
    others: list[dict[str, Any]],
    other_weight: int,
) -> dict[str, Any]:
    out = dict(scheduling) if isinstance(scheduling, dict) else {}
    out["replicaSchedulingType"] = "Divided"
    out["replicaDivisionPreference"] = "Weighted"
    ranked = sorted(weights, key=lambda n: (-weights[n], n))
    entries: list[dict[str, Any]] = [
        {"targetCluster": {"clusterNames": [n]}, "weight": weights[n]} for n in ranked
    ]
    entries += [{"targetCluster": t, "weight": other_weight} for t in others]
    out["weightPreference"] = {"staticWeightList": entries}
    return out


def record_of(base: Mapping[str, Any], new: Mapping[str, Any], body: dict[str, Any]) -> Record:
    record = Record(body=body)
    for field in set(base) | set(new):
        if base.get(field) != new.get(field):
            record.orig[OWN + field] = base.get(field)
            record.own[OWN + field] = fingerprint(new.get(field))
    return record


def diff(current: Mapping[str, Any], new: Mapping[str, Any]) -> list[Change]:
    changes = []
    for field in sorted(set(current) | set(new)):
        if field not in new:
            changes.append(Change(("spec", "placement", field), REMOVE))
        elif current.get(field) != new[field]:
            changes.append(Change(("spec", "placement", field), new[field]))
    return changes


def round_of(record: Record) -> int:
    """The failover groups' naming round a decision record keeps (0: none)."""
    found = record.body.get(ROUND_KEY)
    return found if isinstance(found, int) and not isinstance(found, bool) and found > 0 else 0


def regrouped(
    placement: Mapping[str, Any], record: Record
) -> tuple[list[dict[str, Any]], Record] | None:
    """The failover groups renamed for the next round, and the record owning them; None
    when the placement is no ordered fill in failover groups or carbonshift no longer owns
    its terms. Karmada (before v1.18) schedules a binding from the term it last observed,
    never an earlier one; once that name is gone it starts again from the first term
    (``getAffinityIndex``), in Steady mode: the leader's move back
    (:func:`webhook.decision.karmada.capacity.regroup`)."""
    key = OWN + "clusterAffinities"
    terms = placement.get("clusterAffinities")
    if not isinstance(terms, list) or not record.owns(key, terms):
        return None
    if fill_of(placement)[1] != "groups":
        return None
    round_ = round_of(record) + 1
    renamed = []
    for term in terms:
        found = group_index(str(term.get("affinityName") or ""))
        if found is None:
            renamed.append(term)
            continue
        k, _ = found
        renamed.append({**term, "affinityName": group_name(k or 0, round_, others=k is None)})
    own = {**record.own, key: fingerprint(renamed)}
    body = {**record.body, ROUND_KEY: round_}
    return renamed, Record(body=body, orig=dict(record.orig), own=own)
