"""How Karmada divides replicas among clusters: one implementation for the leader and the simulator.

- :func:`webster`: the Webster / Sainte-Laguë highest-averages method Karmada's
  ``AllocateWebsterSeats`` uses: seats go one at a time to the party with the largest
  ``votes / (2 * seats + 1)``; ties go to the party with fewer seats, then by name,
  ascending or descending per workload (Karmada derives the direction from the
  FNV-32a hash of the workload UID, see :func:`names_descending`).
- :func:`divide_static`: ``staticWeightList`` division (weights 0 are left out; all
  zero means every candidate weighs 1; zero-replica clusters are dropped).
- :func:`divide_available`: ``dynamicWeight: AvailableReplicas`` division, Webster on
  the free capacity; ``None`` (unschedulable) when the candidates cannot hold it all.
- :func:`divide_aggregated`: ``replicaDivisionPreference: Aggregated``, as few clusters
  as hold the replicas, most available replicas first.
- :func:`static_weights`: how Karmada reads a ``staticWeightList`` into a weight per
  cluster.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from webhook.decision.karmada.view import Division, PlacementView

_FNV32_OFFSET = 0x811C9DC5
_FNV32_PRIME = 0x01000193


def fnv32a(text: str) -> int:
    """32-bit FNV-1a hash of the UTF-8 bytes of ``text``."""
    h = _FNV32_OFFSET
    for byte in text.encode("utf-8"):
        h = ((h ^ byte) * _FNV32_PRIME) & 0xFFFFFFFF
    return h


def names_descending(uid: str) -> bool:
    """Karmada's per-workload tie direction: names descending when the UID hash is odd."""
    return fnv32a(uid) % 2 == 1


def webster(seats: int, votes: Mapping[str, int], *, descending: bool = False) -> dict[str, int]:
    """Seats per party (every party listed, possibly with 0)."""
    if seats < 0:
        raise ValueError(f"seats must be >= 0, got {seats}")
    return dict(_webster(seats, tuple(sorted(votes.items())), descending))


@functools.lru_cache(maxsize=65536)
def _webster(
    seats: int, votes: tuple[tuple[str, int], ...], descending: bool
) -> tuple[tuple[str, int], ...]:
    if not votes:
        return ()
    names = [n for n, _ in votes]
    if descending:
        names.reverse()  # among equal priority and seats, the first name scanned wins
    power = dict(votes)
    given = dict.fromkeys(names, 0)
    for _ in range(seats):
        best = names[0]
        best_priority = power[best] / (2 * given[best] + 1)
        for name in names[1:]:
            priority = power[name] / (2 * given[name] + 1)
            if priority > best_priority or (
                priority == best_priority and given[name] < given[best]
            ):
                best, best_priority = name, priority
        given[best] += 1
    return tuple(sorted(given.items()))


def divide_static(
    replicas: int, weights: Mapping[str, int], *, descending: bool = False
) -> dict[str, int]:
    """Replicas per cluster for a static weight list over the candidate clusters."""
    votes = {n: w for n, w in weights.items() if w > 0}
    if not votes:
        votes = dict.fromkeys(weights, 1)
    seats = webster(replicas, votes, descending=descending)
    return {n: s for n, s in seats.items() if s > 0}


def divide_available(
    replicas: int, available: Mapping[str, int], *, descending: bool = False
) -> dict[str, int] | None:
    """Replicas per cluster in proportion to free capacity; None when it does not fit."""
    votes = {n: a for n, a in available.items() if a > 0}
    if sum(votes.values()) < replicas:
        return None
    if replicas == 0:
        return {}
    # Webster can exceed a small party's capacity; cap and hand the rest on.
    placed: dict[str, int] = {}
    remaining = replicas
    while remaining:
        seats = webster(remaining, votes, descending=descending)
        overflow = 0
        for name, s in seats.items():
            take = min(s, votes[name])
            placed[name] = placed.get(name, 0) + take
            votes[name] -= take
            overflow += s - take
        votes = {n: a for n, a in votes.items() if a > 0}
        remaining = overflow
    return {n: s for n, s in placed.items() if s > 0}


def divide_aggregated(
    replicas: int, available: Mapping[str, int], *, descending: bool = False
) -> dict[str, int] | None:
    """Karmada's Aggregated division (``dynamicDivideReplicas``, ``AggregatedStrategy``):
    clusters by most available replicas first, as few of them as hold ``replicas``, then
    :func:`divide_available` among those; None when all together cannot hold it.

    Equal rooms go by name (Karmada keeps the scheduler's candidate order among them,
    which follows scores carbonshift does not see).
    """
    votes = {n: a for n, a in available.items() if a > 0}
    if sum(votes.values()) < replicas:
        return None
    chosen: dict[str, int] = {}
    for name in sorted(votes, key=lambda n: (-votes[n], n)):
        if sum(chosen.values()) >= replicas:
            break
        chosen[name] = votes[name]
    return divide_available(replicas, chosen, descending=descending)


def static_weights(
    view: PlacementView,
    allowed: Callable[[Mapping[str, Any] | None], Iterable[str]],
) -> dict[str, int] | None:
    """Karmada's static weight per cluster (``getStaticWeightInfoList``): the highest
    weight among the entries whose ``targetCluster`` matches it (``allowed``: the clusters
    an affinity matches). None when Karmada does not divide the placement by static
    weights (Duplicated, Aggregated, a ``dynamicWeight``, or no list)."""
    if view.division is not Division.STATIC_WEIGHT:
        return None
    weights: dict[str, int] = {}
    for rule in view.static_weights:
        for name in allowed(rule.target):
            weights[name] = max(weights.get(name, 0), rule.weight)
    return weights
