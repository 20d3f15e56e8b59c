"""A (Cluster)PropagationPolicy's counterfactual for the carbon accounting: where the same
replicas would run under the user's own placement, as Karmada divides them
(:mod:`webhook.decision.accounting` does the arithmetic)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.decision.accounting import record_of
from webhook.decision.karmada.capacity import tier_fill
from webhook.decision.karmada.division import (
    divide_aggregated,
    divide_available,
    divide_static,
    names_descending,
)
from webhook.decision.karmada.view import Division, PlacementView
from webhook.decision.record import Record, user_view
from webhook.model.objects import mapping


def candidates(record: Record) -> list[str]:
    """The clusters the decision considered: the ones the user's policy allows."""
    return sorted(str(n) for n in record.entries)


def user_placement(policy: Mapping[str, Any]) -> dict[str, Any]:
    """The policy's placement as the user wrote it (what carbonshift owns put back)."""
    return user_view(mapping(policy, "spec", "placement"), record_of(policy), "placement.")


def _names(term: object) -> list[str]:
    if not isinstance(term, Mapping):
        return []
    names = term.get("clusterNames")
    return [str(n) for n in names] if isinstance(names, list) else []


def counterfactual_placement(
    policy: Mapping[str, Any],
    replicas: int,
    *,
    uid: str = "",
    room: Mapping[str, int] | None = None,
) -> dict[str, int] | None:
    """Replicas per cluster as Karmada divides ``replicas`` under the user's own placement
    (over the candidates the decision record lists, read through
    :class:`~webhook.decision.karmada.view.PlacementView`); None when it cannot be told
    (no record, or a division that needs the room and the room is not known).

    - ``Duplicated`` (or no ``replicaScheduling``): every candidate runs them all;
    - ``Divided`` by a ``staticWeightList``: :func:`divide_static` on the weights (entries
      by ``clusterNames``: the record knows no labels);
    - ``Divided`` without weights: an even split (:func:`divide_static`, all weights 1);
    - ``Divided`` by ``dynamicWeight: AvailableReplicas``: the user's
      ``overflowAffinities`` tiers by :func:`tier_fill`, else :func:`divide_available`,
      on ``room``; without ``room``: an even split;
    - ``Divided`` + ``Aggregated``: as few clusters as hold the replicas, most room first
      (:func:`divide_aggregated`), tier after tier when the user has overflow tiers (each
      tier takes what its room holds); without ``room``: None. ``room`` here is each
      cluster's room plus the replicas the binding runs there now, so this is Karmada's
      Fresh division (as on a first schedule); Karmada's Steady mode would keep clusters
      that already run replicas first. Equal rooms go by name.
    A user ``clusterAffinities`` list: its first term's clusters (Karmada tries it first).
    """
    names = candidates(record_of(policy))
    if not names or replicas < 0:
        return None
    view = PlacementView.of(user_placement(policy))
    descending = names_descending(uid) if uid else False
    tiers: list[list[str]] = []
    if view.terms:
        first = view.terms[0]
        tiers = [first.names] + [_names(o) for o in first.overflow or ()]
        tiers = [[n for n in t if n in names] for t in tiers]
        tiers = [t for t in tiers if t]
        names = sorted({n for t in tiers[:1] for n in t}) or names
    division = view.division
    if division is Division.DUPLICATED:
        return dict.fromkeys(names, replicas) if replicas else {}
    if division is Division.STATIC_WEIGHT:
        weights: dict[str, int] = {}
        for entry in view.static_weights:
            for name in _names(entry.target):
                if name in names:
                    weights[name] = max(weights.get(name, 0), entry.weight)
        if weights:
            return divide_static(replicas, weights, descending=descending)
        return None
    if division is Division.AGGREGATED:
        if room is None:
            return None
        return _aggregated(replicas, tiers if len(tiers) > 1 else [names], room, descending)
    if view.by_room and room is not None:
        if len(tiers) > 1:
            return tier_fill(replicas, tiers, room, descending=descending)
        return divide_available(replicas, {n: room.get(n, 0) for n in names}, descending=descending)
    return divide_static(replicas, dict.fromkeys(names, 1), descending=descending)


def _aggregated(
    replicas: int, tiers: list[list[str]], room: Mapping[str, int], descending: bool
) -> dict[str, int] | None:
    """Aggregated tier after tier (Karmada's overflow: each tier takes ``min(remaining,
    its room)``, a cluster counts in the first tier it appears in); None: they cannot
    hold ``replicas``."""
    remaining, out, seen = replicas, {}, set()
    for tier in tiers:
        names = [n for n in tier if n not in seen]
        seen.update(names)
        if not names or remaining <= 0:
            continue
        free = {n: max(0, room.get(n, 0)) for n in names}
        target = min(remaining, sum(free.values()))
        placed = divide_aggregated(target, free, descending=descending)
        assert placed is not None  # the target never exceeds the tier's room
        out.update(placed)
        remaining -= target
    return out if remaining <= 0 else None
