"""Capacity: how Karmada fills ordered tiers, what room a cluster has, when to move back.

carbonshift's default placement (:mod:`webhook.decision.karmada.placement`, strategy ``fill``)
writes the candidates as ordered ``overflowAffinities`` tiers, greenest first, divided by
``dynamicWeight: AvailableReplicas``. Karmada (v1.18, ``pkg/scheduler/core/common.go``)
then fills tier 0 up to its estimated room, the rest goes to tier 1, and so on. Before
v1.18 it writes failover groups (term *k*: tiers 0 to *k*), and Karmada takes the first
term, from the one the binding last observed, whose clusters hold every replica. This
module holds the pure pieces every caller shares (the leader, ``carbonshift mutate``,
the simulator):

- :func:`tier_fill`: Karmada's tier-fill of one binding (Steady and Fresh modes);
  :func:`group_fill`: its failover over the groups.
- :func:`room`: Karmada's general estimator, replicas a cluster can still take from its
  ``status.resourceSummary`` and the binding's per-replica requests.
- :func:`plan_move`: the move-back rule. Karmada never moves replicas back to a greener
  tier by itself when room returns (Steady mode); the leader asks for a Fresh
  reschedule (a WorkloadRebalancer) only when the saving over the horizon beats the
  cost of the moves by a margin, within a move budget.

No I/O and no clock: data in, decision out.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Literal

from webhook.decision.karmada.division import divide_available
from webhook.decision.quantity import quantity
from webhook.model.config import RebalanceConfig
from webhook.model.objects import EMPTY

Tiers = Sequence[Sequence[str]]
"""Cluster names per tier, greenest tier first (Karmada's ``OverflowOrder``)."""
Counts = Mapping[str, int]
"""Replicas per cluster."""


def _fit(replicas: int, votes: Mapping[str, int], *, descending: bool) -> dict[str, int]:
    if replicas <= 0:
        return {}
    out = divide_available(replicas, votes, descending=descending)
    if out is None:  # callers never ask for more than the votes hold
        raise ValueError(f"{replicas} replicas do not fit {dict(votes)}")
    return out


def tier_fill(
    replicas: int,
    tiers: Tiers,
    room: Counts,
    previous: Counts = EMPTY,
    *,
    fresh: bool = False,
    descending: bool = False,
) -> dict[str, int] | None:
    """Replicas per cluster as Karmada's overflow scheduling assigns them; None: unschedulable.

    ``room``: replicas each cluster can still take besides this binding's own
    (``AllocatableReplicas``); ``previous``: the binding's replicas per cluster now.
    Tier *i* gets ``min(remaining, Σ(room + previous))`` over its clusters. Inside a tier,
    Steady mode (``fresh=False``) adds a scale-up by room and shrinks a scale-down in
    proportion to the previous replicas; Fresh mode (a rescheduling trigger) divides the
    tier's target anew by room + previous. A cluster in no tier keeps nothing (Karmada
    filters it out). None when the tiers together cannot hold ``replicas`` (Karmada then
    keeps the previous result).
    """
    remaining = replicas
    out: dict[str, int] = {}
    seen: set[str] = set()
    for tier in tiers:
        names = [n for n in tier if n not in seen]  # first tier a cluster appears in wins
        seen.update(names)
        if not names or remaining <= 0:
            continue
        have = {n: max(0, previous.get(n, 0)) for n in names}
        free = {n: max(0, room.get(n, 0)) for n in names}
        target = min(remaining, sum(have.values()) + sum(free.values()))
        remaining -= target
        held = sum(have.values())
        if fresh:
            part = _fit(target, {n: free[n] + have[n] for n in names}, descending=descending)
        elif held < target:
            part = _fit(target - held, free, descending=descending)
            for n, k in have.items():
                part[n] = part.get(n, 0) + k
        elif held > target:
            part = _fit(target, have, descending=descending)
        else:
            part = dict(have)
        out.update({n: k for n, k in part.items() if k > 0})
    if remaining > 0:
        return None
    return out


def groups_of(tiers: Tiers) -> list[list[str]]:
    """The failover groups of ``tiers``: group *k* holds tiers 0 to *k* (the ``groups``
    shape's terms, :mod:`webhook.decision.karmada.api`)."""
    out: list[list[str]] = []
    names: list[str] = []
    for tier in tiers:
        names = [*names, *(n for n in tier if n not in names)]
        out.append(names)
    return out


def group_fill(
    replicas: int,
    tiers: Tiers,
    room: Counts,
    previous: Counts = EMPTY,
    *,
    start: int = 0,
    fresh: bool = False,
    descending: bool = False,
) -> tuple[dict[str, int], int] | None:
    """Replicas per cluster as Karmada before v1.18 assigns failover groups (the
    ``groups`` shape), and the index of the term that held them; None: no term can.

    Karmada's scheduler (v1.16 ``scheduleResourceBindingWithClusterAffinities``) tries
    the terms from ``start`` (the term the binding last observed,
    ``status.schedulerObservedAffinityName``; 0 when it is gone) to the last, never an
    earlier one, and keeps the first whose division succeeds. Inside a term (group *k*:
    tiers 0 to *k*, :func:`groups_of`) ``dynamicWeight: AvailableReplicas`` divides
    (``assignByDynamicStrategy``): Steady mode keeps the previous replicas on the term's
    clusters and spreads the rest by ``room``, failing when the room is short; a
    scale-down shrinks every previous cluster in proportion; Fresh mode divides the whole
    by room + previous.
    """
    groups = groups_of(tiers)
    first = start if 0 <= start < len(groups) else 0
    for index in range(first, len(groups)):
        got = _divide_dynamic(
            replicas, groups[index], room, previous, fresh=fresh, descending=descending
        )
        if got is not None:
            return got, index
    return None


def regroup(
    replicas: int, tiers: Tiers, room: Counts, previous: Counts, *, descending: bool = False
) -> dict[str, int] | None:
    """Where failover groups put a binding's replicas once the terms are renamed: Karmada
    then finds the term the binding observed gone and schedules again from the first, in
    Steady mode (:func:`group_fill` from 0): the replicas on the greener tiers stay, the
    rest go to the first group whose room takes them. Karmada before v1.18 never goes
    back to an earlier term by itself, and a Fresh reschedule (a WorkloadRebalancer)
    starts from the observed term too; the leader's move back renames the terms
    (:func:`webhook.decision.karmada.terms.regrouped`). None: no group takes them."""
    got = group_fill(replicas, tiers, room, previous, descending=descending)
    return got[0] if got is not None else None


def _divide_dynamic(
    replicas: int,
    names: Sequence[str],
    room: Counts,
    previous: Counts,
    *,
    fresh: bool,
    descending: bool,
) -> dict[str, int] | None:
    """Karmada's ``assignByDynamicStrategy`` over one term's clusters; None: unschedulable."""
    held = {n: previous[n] for n in names if previous.get(n, 0) > 0}
    free = {n: max(0, room.get(n, 0)) for n in names}
    if fresh:
        votes = {n: free[n] + held.get(n, 0) for n in names}
        if sum(votes.values()) < replicas:
            return None
        return _fit(replicas, votes, descending=descending)
    assigned = sum(held.values())
    if assigned > replicas:  # scale down: every previous cluster, in proportion
        before = {n: k for n, k in previous.items() if k > 0}
        return {n: k for n, k in _fit(replicas, before, descending=descending).items() if k}
    if assigned == replicas:
        return held
    extra = replicas - assigned
    if sum(free.values()) < extra:
        return None
    out = _fit(extra, free, descending=descending)
    for n, k in held.items():
        out[n] = out.get(n, 0) + k
    return {n: k for n, k in out.items() if k > 0}


# --- room: Karmada's general estimator ---------------------------------------------------


def _amounts(values: object) -> dict[str, Decimal]:
    if not isinstance(values, Mapping):
        return {}
    out = {}
    for name, raw in values.items():
        amount = quantity(raw)
        if isinstance(name, str) and amount is not None:
            out[name] = amount
    return out


_Key = tuple[tuple[object, str], ...]


def _key(values: object) -> _Key | None:
    """``values`` as a hashable key of the same amounts: its items when every value is a
    string (a listed object's quantities always are); None otherwise (not cached)."""
    if values is None:
        return ()
    if type(values) is not dict and not isinstance(values, Mapping):
        return ()  # read as no amounts either way
    found = tuple(values.items())
    for _, raw in found:
        if type(raw) is not str:
            return None
    return found


def room(summary: object, requests: object) -> int | None:
    """Replicas a cluster can still take: Karmada's general estimator (``general.go``).

    ``summary`` is the Cluster's ``status.resourceSummary``, ``requests`` the binding's
    ``replicaRequirements.resourceRequest`` (None or empty: only the pod count bounds it).
    None when the summary is missing or unreadable (the room is not known).

    A fleet repeats a few summaries and requests for every binding of a pass, so the
    answer is cached by their quantity strings.
    """
    if type(summary) is not dict and not isinstance(summary, Mapping):
        return None
    keys = (
        _key(summary.get("allocatable")),
        _key(summary.get("allocated")),
        _key(summary.get("allocating")),
        _key(requests),
    )
    if keys[0] is None or keys[1] is None or keys[2] is None or keys[3] is None:
        return _room(
            summary.get("allocatable"), summary.get("allocated"), summary.get("allocating"),
            requests,
        )  # fmt: skip
    return _room_of(*keys)


@functools.lru_cache(maxsize=4096)
def _room_of(allocatable: _Key, allocated: _Key, allocating: _Key, requests: _Key) -> int | None:
    return _room(dict(allocatable), dict(allocated), dict(allocating), dict(requests))


def _room(
    allocatable_: object, allocated_: object, allocating_: object, requests: object
) -> int | None:
    allocatable = _amounts(allocatable_)
    if not allocatable:
        return None
    allocated = _amounts(allocated_)
    allocating = _amounts(allocating_)

    def free(resource: str) -> Decimal:
        zero = Decimal(0)
        return (
            allocatable.get(resource, zero)
            - allocated.get(resource, zero)
            - allocating.get(resource, zero)
        )

    bound = free("pods") if "pods" in allocatable else Decimal(2**31 - 1)
    if bound <= 0:
        return 0
    for resource, request in _amounts(requests).items():
        if request <= 0:
            continue
        if resource not in allocatable:
            return 0
        left = free(resource)
        if left <= 0:
            return 0
        bound = min(bound, left / request)
    return math.floor(bound)


# --- moving back ---------------------------------------------------------------------------


MoveRule = RebalanceConfig
"""When the leader asks Karmada to move replicas back to greener tiers: the
configuration's ``rebalance`` section itself (``move_cost_hours``, ``margin``,
``horizon_hours``, ``max_moves_per_policy``, ``replica_watts``)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Move:
    """A Fresh reschedule worth asking for."""

    target: dict[str, int]
    """Replicas per cluster after it (as :func:`tier_fill` predicts)."""
    moved: int
    """Replicas that change cluster."""
    saving_grams: float
    """Expected saving over the horizon, net of the moves' cost."""

    def describe(self, current: Counts) -> str:
        """``member-pl -3, member-fr +3``: what moves."""
        names = sorted(set(current) | set(self.target))
        deltas = [(n, self.target.get(n, 0) - current.get(n, 0)) for n in names]
        return ", ".join(f"{n} {d:+d}" for n, d in deltas if d)


def _cost(counts: Counts, intensities: Mapping[str, float | None], neutral: float) -> float:
    total = 0.0
    for name, n in counts.items():
        value = intensities.get(name)
        total += n * (value if value is not None else neutral)
    return total


MoveVerdict = Literal["moved", "no_room", "over_budget", "not_worth_it"]


def plan_move(
    current: Counts,
    tiers: Tiers,
    room_now: Counts,
    intensities: Mapping[str, float | None],
    rule: MoveRule,
    *,
    budget: int,
    descending: bool = False,
    groups: bool = False,
) -> Move | None:
    """The Fresh reschedule to ask for now, or None (not worth it, or over ``budget``).

    ``current``: where the binding's replicas run; ``room_now``: what each cluster can
    still take besides them; ``intensities``: what the replicas will see over the horizon
    (the forecast mean); ``budget``: replicas that may still move this hour (the policy's
    and the fleet's budgets, the smaller); ``groups``: the tiers are failover groups, and
    the move renames their terms so Karmada schedules them again from the first
    (:func:`regroup`).
    """
    move, _ = assess_move(
        current, tiers, room_now, intensities, rule, budget=budget, descending=descending,
        groups=groups,
    )  # fmt: skip
    return move


def assess_move(
    current: Counts,
    tiers: Tiers,
    room_now: Counts,
    intensities: Mapping[str, float | None],
    rule: MoveRule,
    *,
    budget: int,
    descending: bool = False,
    neutral: float | None = None,
    groups: bool = False,
) -> tuple[Move | None, MoveVerdict | None]:
    """:func:`plan_move`'s move and the verdict: ``moved``; ``no_room`` (a Fresh fill
    finds no room, or nothing moves while replicas run past the first tier);
    ``over_budget``; ``not_worth_it``; None: the replicas are where they belong.
    ``neutral``: the value of a cluster without intensity (default: the mean of the known
    ones; pass it when planning many bindings on the same intensities); ``groups``: the
    tiers are failover groups (:func:`regroup`)."""
    replicas = sum(current.values())
    if replicas <= 0:
        return None, None
    if groups:
        target = regroup(replicas, tiers, room_now, current, descending=descending)
    else:
        target = tier_fill(replicas, tiers, room_now, current, fresh=True, descending=descending)
    if target is None:
        return None, "no_room"
    moved = sum(max(0, n - current.get(c, 0)) for c, n in target.items())
    if moved == 0:
        first = set(tiers[0]) if tiers else set()
        return None, ("no_room" if any(c not in first for c in current) else None)
    if moved > min(budget, rule.max_moves_per_policy):
        return None, "over_budget"
    if neutral is None:
        neutral = neutral_intensity(intensities)
    per_hour = _cost(current, intensities, neutral) - _cost(target, intensities, neutral)
    arriving = {c: max(0, n - current.get(c, 0)) for c, n in target.items()}
    cost = rule.move_cost_hours * _cost(arriving, intensities, neutral)
    saving = per_hour * rule.horizon_hours
    if saving <= cost * (1.0 + rule.margin):
        return None, "not_worth_it"
    grams = (saving - cost) * rule.replica_watts / 1000.0
    return Move(target, moved, grams), "moved"


def neutral_intensity(intensities: Mapping[str, float | None]) -> float:
    """What a cluster without intensity counts as in a move's cost: the mean of the known."""
    known = [v for v in intensities.values() if v is not None]
    return sum(known) / len(known) if known else 0.0
