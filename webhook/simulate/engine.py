"""The simulation loops: hour by hour, every policy side by side on the same grid.

Spatial model
    Each workload instance is one PropagationPolicy. At creation every policy places it
    (carbonshift's: the webhook's decider, which stores the placement and its decision
    annotation); policies that re-evaluate may place movable instances again every
    ``interval_hours`` (carbonshift's: the leader's re-evaluation step on the stored
    policy, then the leader's move-back of an ordered fill). An intent becomes replica
    counts as Karmada would divide it (:mod:`webhook.decision.karmada.division`): static
    weights by Webster, then replicas that do not fit a cluster's free capacity spill,
    carbon-blind, to the clusters with the most free capacity (Karmada's
    available-replicas division). Affinity terms are tried in order: with static
    weights no term ever fails, so the first one wins and is divided by weight,
    spilling as above; divided by available replicas, the first whose clusters can
    hold every replica wins (none: the replicas spill). An ordered fill is filled tier
    by tier (:func:`webhook.decision.karmada.capacity.tier_fill`); written as failover
    groups (Karmada before v1.18) it is scheduled as that release does
    (:func:`webhook.decision.karmada.capacity.group_fill`): from the term the workload
    last observed, never an earlier one, again only when the placement changes the
    observed term, the replica count changes or the leader asks for a move. A replica
    that changes cluster counts as one migration.

    Two oracles know every hour's intensity. The free oracle may move every replica every
    hour for free and respects capacity: each hour it fills the greenest clusters first.
    Per hour this is the cheapest feasible assignment of that hour's replicas, so no
    policy can emit less; but it also moves work the scenario marks immovable, so it is
    an upper bound, not always an attainable target. The constrained oracle
    (:class:`_ConstrainedOracle`, the target every "of oracle" figure is a share of)
    moves only movable replicas, for free, and places each immovable instance once, at
    its arrival, where it costs least over its life.

Temporal model
    Each batch pool is a NodePool in one zone; jobs arrive every ``every_hours`` and run
    ``length_hours`` without interruption. While the pool is paused, pending jobs wait;
    when it is not, every pending job starts. A pool on a ladder step (a share of its
    cpu limit, strategy ``ladder``) starts that share of its pending jobs each hour, the
    most urgent first, fractions carried from hour to hour (:func:`_starts`): capacity
    for that share of the work, the rest waits. A deadline guard unpauses the pool when
    the most urgent job reaches its latest start. The constrained oracle starts each job
    at the greenest moment of its window, knowing the future; the free oracle (upper
    bound) may also split a job across the greenest hours of its window.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from array import array
from collections.abc import Callable, Mapping, Sequence

from webhook.decision.forecast import Method, history_needed, outlook, ranking_value
from webhook.decision.karmada.capacity import group_fill, groups_of, plan_move, tier_fill
from webhook.decision.karmada.division import divide_available, divide_static, names_descending
from webhook.simulate import budget as budget_mod
from webhook.simulate.batch import PausePolicy, PoolMoment, batch_policies
from webhook.simulate.grid import Grid
from webhook.simulate.metrics import Role, Run, fewest_moves, moved
from webhook.simulate.policies import (
    Fill,
    Held,
    Intent,
    SpatialPolicy,
    Weights,
    greedy,
    spatial_policies,
)
from webhook.simulate.scenario import BatchPool, Scenario

ORACLE = "oracle"
"""Key of the constrained oracle, the target every "of oracle" figure is a share of."""
FREE_ORACLE = "oracle-free"
"""Key of the free oracle, the upper bound (moves immovable work, splits batch jobs)."""

UNLIMITED = 10**9
"""Capacity of a cluster without a limit."""

Tick = Callable[[int], None]


def _no_tick(_: int) -> None:
    return None


# --- spatial -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Instance:
    """One run of a workload: ``replicas`` present from hour ``arrive`` to ``leave`` (excl.)."""

    uid: str
    replicas: int
    movable: bool
    arrive: int
    leave: int
    descending: bool
    """Karmada's tie direction for this workload."""
    daily_low: float | None = None
    """Daily scaling (:attr:`Workload.daily_low`); None: always ``replicas``."""

    def replicas_at(self, hour: int) -> int:
        """Replicas wanted in ``hour`` (hours from the scenario start, which is at 00:00)."""
        if self.daily_low is None:
            return self.replicas
        day = 0.5 - 0.5 * math.cos(2 * math.pi * (hour % 24) / 24)  # 0 at 00:00, 1 at 12:00
        return max(1, round(self.replicas * (self.daily_low + (1 - self.daily_low) * day)))


def instances(scenario: Scenario) -> list[Instance]:
    """Every workload instance in the scenario, in arrival order."""
    hours = scenario.hours
    out = []
    for w in scenario.workloads:
        arrivals = (
            range(w.offset_hours, hours, w.every_hours) if w.every_hours else [w.offset_hours]
        )
        for k, arrive in enumerate(arrivals):
            if arrive >= hours:
                break
            leave = hours if w.run_hours is None else min(hours, arrive + w.run_hours)
            uid = f"{w.name}-{k}"
            out.append(
                Instance(
                    uid,
                    w.replicas,
                    w.movable,
                    arrive,
                    leave,
                    names_descending(uid),
                    w.daily_low,
                )
            )
    out.sort(key=lambda i: (i.arrive, i.uid))
    return out


def demand(items: Sequence[Instance], hours: int) -> list[int]:
    """Replicas present in each hour."""
    delta = [0] * (hours + 1)
    out = [0] * hours
    for inst in items:
        if inst.daily_low is None:
            delta[inst.arrive] += inst.replicas
            delta[inst.leave] -= inst.replicas
            continue
        for h in range(inst.arrive, inst.leave):
            out[h] += inst.replicas_at(h)
    running = 0
    for h in range(hours):
        running += delta[h]
        out[h] += running
    return out


def capacities(scenario: Scenario, peak: int) -> dict[str, int]:
    """Replicas each cluster can hold; raises ValueError when the fleet cannot fit."""
    caps = {}
    for c in scenario.clusters:
        if c.replicas is not None:
            caps[c.name] = c.replicas
        elif c.share is not None:
            caps[c.name] = math.floor(c.share * peak + 1e-9)
        else:
            caps[c.name] = UNLIMITED
    if sum(caps.values()) < peak:
        raise ValueError(
            f"clusters hold {sum(caps.values())} replicas in total, "
            f"but the workloads need {peak} at peak"
        )
    return caps


def realise(
    intent: Intent,
    replicas: int,
    free: Mapping[str, int],
    *,
    descending: bool,
    previous: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """Replica counts for ``intent`` given each cluster's free capacity.

    ``free`` counts this workload's own ``previous`` replicas as free. An ordered fill
    is divided by Karmada's tier fill in Steady mode (:func:`capacity.tier_fill`, with
    the room the other workloads leave); a fill that cannot hold every replica (a
    ``max-intensity`` filter over a full fleet) spills like the rest below.
    """
    return realise_at(intent, replicas, free, descending=descending, previous=previous)[0]


def realise_at(
    intent: Intent,
    replicas: int,
    free: Mapping[str, int],
    *,
    descending: bool,
    previous: Mapping[str, int] | None = None,
    start: int = 0,
    fresh: bool = False,
) -> tuple[dict[str, int], int]:
    """:func:`realise`, and for failover groups the term Karmada settled on (from
    ``start``, the term the workload last observed; Fresh mode with ``fresh``); 0 for
    any other intent."""
    counts: dict[str, int] = {}
    overflow = 0
    if isinstance(intent, Fill):
        mine = previous or {}  # untyped: an optional parameter
        filled = _filled(intent, replicas, free, mine, start=start, fresh=fresh, desc=descending)
        if filled is not None:
            return filled
        overflow = replicas
    elif isinstance(intent, Weights):
        counts = divide_static(replicas, intent.as_weights(), descending=descending)
    elif intent.weights:
        # Static weights never fail a term: the first with a cluster wins, divided by weight.
        weights = dict(intent.weights)
        term = next((t for t in intent.terms if t), ())
        votes = {c: weights.get(c, 0) for c in term}
        counts = divide_static(replicas, votes, descending=descending)
    else:
        for term in intent.terms:
            fit = divide_available(replicas, {c: free[c] for c in term}, descending=descending)
            if fit is not None:
                return fit, 0
        overflow = replicas  # no term can hold it all: modelled as spill
    for name, n in list(counts.items()):
        take = min(n, free[name])
        overflow += n - take
        counts[name] = take
    if overflow:
        room = {c: free[c] - counts.get(c, 0) for c in free}
        spill = divide_available(overflow, room, descending=descending)
        if spill is None:
            raise ValueError("not enough free capacity for the workload")
        for name, n in spill.items():
            counts[name] = counts.get(name, 0) + n
    last = len(intent.tiers) - 1 if isinstance(intent, Fill) and intent.groups else 0
    return {c: n for c, n in counts.items() if n > 0}, last


class _Fleet:
    """One spatial policy's placements, capacity use and tallies."""

    def __init__(
        self,
        policy: SpatialPolicy,
        clusters: Sequence[str],
        caps: Mapping[str, int],
        hours: int,
        role: Role,
    ) -> None:
        self.policy = policy
        self.caps = caps
        self.clusters = clusters
        self.used = dict.fromkeys(clusters, 0)
        self.counts: dict[str, dict[str, int]] = {}
        self.held: dict[str, Held] = {}
        self.active: dict[str, Instance] = {}
        self.observed: dict[str, int] = {}
        """Failover groups: the term each workload's binding last observed (Karmada's
        ``schedulerObservedAffinityName``), by index."""
        days = (hours + 23) // 24
        self.run = Run(
            policy.key,
            policy.label,
            role,
            policy.info,
            array("d", bytes(8 * hours)),
            daily_share={c: array("d", bytes(8 * days)) for c in clusters},
        )

    def _free(self, exclude: str | None = None) -> dict[str, int]:
        mine = self.counts.get(exclude, {}) if exclude else {}
        return {c: self.caps[c] - self.used[c] + mine.get(c, 0) for c in self.clusters}

    def _apply(self, inst: Instance, counts: dict[str, int]) -> None:
        old = self.counts.get(inst.uid, {})
        for c, n in old.items():
            self.used[c] -= n
        for c, n in counts.items():
            self.used[c] += n
        self.counts[inst.uid] = counts

    def release(self, inst: Instance) -> None:
        self._apply(inst, {})
        del self.counts[inst.uid]
        self.held.pop(inst.uid, None)
        self.active.pop(inst.uid, None)
        self.observed.pop(inst.uid, None)

    def _realise(
        self,
        inst: Instance,
        intent: Intent,
        replicas: int,
        previous: Mapping[str, int] | None = None,
        *,
        start: int = 0,
        fresh: bool = False,
    ) -> dict[str, int]:
        """:func:`realise_at` with the room the other workloads leave; remembers the term
        a failover-groups workload settled on."""
        free = self._free(inst.uid if previous is not None else None)
        counts, term = realise_at(
            intent, replicas, free, descending=inst.descending, previous=previous,
            start=start, fresh=fresh,
        )  # fmt: skip
        self.observed[inst.uid] = term
        return counts

    def place(self, inst: Instance, view: Mapping[str, float], t: int) -> None:
        held = self.policy.create(view, t)
        self.held[inst.uid] = held
        self.active[inst.uid] = inst
        counts = self._realise(inst, held.intent, inst.replicas_at(t))
        self._apply(inst, counts)

    def rescale(self, t: int) -> None:
        """Workloads that scale: Karmada reschedules a changed replica count (Steady)."""
        for uid, inst in self.active.items():
            wanted = inst.replicas_at(t)
            before = self.counts[uid]
            if inst.daily_low is None or wanted == sum(before.values()):
                continue
            intent = self.held[uid].intent
            after = self._realise(inst, intent, wanted, before, start=self.observed.get(uid, 0))
            # Karmada may refill a greener tier on a scale-up (or keep a dirtier one on a
            # scale-down): the replicas that change cluster are moves like any other.
            self.run.moves += moved(before, after, max(0, sum(before.values()) - wanted))
            self._apply(inst, after)

    def revisit(self, view: Mapping[str, float], t: int) -> None:
        budget = self.policy.move_budget
        for uid, inst in self.active.items():
            if not inst.movable or inst.arrive == t:
                continue
            old = self.held[uid]
            new = self.policy.revisit(old, view, t)
            self.held[uid] = new
            before = self.counts[uid]
            if new.intent == old.intent:
                budget -= self._move_back(inst, new.intent, view, budget)
                continue
            self.run.changes += 1  # the policy is rewritten
            start = _rescheduled_from(old.intent, new.intent, self.observed.get(uid, 0))
            if start is None:  # Karmada sees no change in the term the binding observed
                continue
            after = self._realise(inst, new.intent, sum(before.values()), before, start=start)
            if after != before:
                self.run.moves += moved(before, after, 0)
                self._apply(inst, after)

    def _move_back(
        self, inst: Instance, intent: Intent, view: Mapping[str, float], budget: int
    ) -> int:
        """The leader's move-back (:func:`capacity.plan_move`); returns the replicas moved."""
        rule = self.policy.move
        if rule is None or not isinstance(intent, Fill) or budget <= 0:
            return 0
        before = self.counts[inst.uid]
        room = self._free()
        move = plan_move(
            before, intent.tiers, room, view, rule, budget=budget, descending=inst.descending,
            groups=intent.groups,
        )  # fmt: skip
        if move is None:
            return 0
        if intent.groups:  # the renamed terms: Karmada starts again from the first
            settled = group_fill(
                sum(before.values()), intent.tiers, room, before, descending=inst.descending
            )
            self.observed[inst.uid] = settled[1] if settled is not None else 0
        self.run.rebalances += 1
        self.run.moves += move.moved
        self._apply(inst, move.target)
        return move.moved

    def account(self, t: int, current: Mapping[str, float], kw: float) -> None:
        day = t // 24
        total = 0.0
        for c, n in self.used.items():
            if n:
                total += n * current[c]
                self.run.daily_share[c][day] += n
        self.run.hourly[t] = total * kw


class _Oracle:
    """The free oracle: each hour, the hour's replicas on the greenest clusters first,
    within capacity, immovable ones included (an upper bound, not always attainable)."""

    def __init__(self, clusters: Sequence[str], caps: Mapping[str, int], hours: int) -> None:
        self.caps = caps
        self.last = dict.fromkeys(clusters, 0)
        """The last hour's replicas per cluster (its moves are counted from them)."""
        days = (hours + 23) // 24
        self.run = Run(
            FREE_ORACLE,
            "free oracle: perfect knowledge, capacity respected, free migration of every "
            "replica, immovable ones included (upper bound)",
            Role.FREE_ORACLE,
            "perfect (future known)",
            array("d", bytes(8 * hours)),
            daily_share={c: array("d", bytes(8 * days)) for c in clusters},
        )

    def account(self, t: int, current: Mapping[str, float], replicas: int, kw: float) -> None:
        day = t // 24
        total = 0.0
        left = replicas
        used = dict.fromkeys(self.last, 0)
        for c in sorted(current, key=lambda n: (current[n], n)):
            if not left:
                break
            n = min(left, self.caps[c])
            left -= n
            total += n * current[c]
            used[c] = n
            self.run.daily_share[c][day] += n
        self.run.hourly[t] = total * kw
        self.run.moves += fewest_moves(list(self.last.values()), list(used.values()))
        self.last = used


class _ConstrainedOracle:
    """The constrained oracle: perfect knowledge and free migration of the movable
    replicas, but capacity and ``movable: false`` respected.

    Each immovable instance is placed once, at its arrival, for its whole life; its
    replicas go, one at a time, to the cluster that adds the least to the fleet's
    emissions over that life, given the hour-by-hour greenest-first fill of everything
    movable around the replicas already pinned (that cost is convex in the pinned
    counts, so one replica at a time is optimal for one instance given the others). Two
    passes re-place every instance given all the others. The movable replicas (and the
    part of a scaling immovable workload above its lowest count, which Karmada places
    afresh when it scales) fill the room left, greenest first, every hour. The result is
    a feasible schedule: what a policy with perfect foresight could do, the target."""

    PASSES = 2

    def __init__(
        self,
        clusters: Sequence[str],
        caps: Mapping[str, int],
        need: Sequence[int],
        values: Sequence[Sequence[float]],
        pinned_items: Sequence[Instance],
    ) -> None:
        hours = len(need)
        self.clusters = list(clusters)
        self.caps = [caps[c] for c in clusters]
        self.need = need
        self.values = values
        """Per hour, each cluster's intensity (in ``clusters`` order)."""
        names = self.clusters
        self.order = [
            [i for _, _, i in sorted((v[i], names[i], i) for i in range(len(names)))]
            for v in values
        ]
        self.pinned = [[0] * len(clusters) for _ in range(hours)]
        self.last = [0] * len(clusters)
        """The last hour's replicas per cluster (its moves are counted from them)."""
        days = (hours + 23) // 24
        self.run = Run(
            ORACLE,
            "constrained oracle: perfect knowledge, free migration of movable replicas, "
            "capacity and movable: false respected",
            Role.ORACLE,
            "perfect (future known)",
            array("d", bytes(8 * hours)),
            daily_share={c: array("d", bytes(8 * days)) for c in clusters},
        )
        placed: dict[int, list[int]] = {}
        items = [(k, inst, _lowest(inst)) for k, inst in enumerate(pinned_items)]
        for _ in range(self.PASSES):
            for k, inst, count in items:
                if k in placed:
                    self._pin(inst, placed[k], -1)
                placed[k] = self._place(inst, count)

    def _pin(self, inst: Instance, counts: Sequence[int], sign: int) -> None:
        for t in range(inst.arrive, inst.leave):
            row = self.pinned[t]
            for i, n in enumerate(counts):
                row[i] += sign * n

    def _marginal(self, t: int) -> tuple[list[bool], float]:
        """Hour ``t``: which clusters hold movable replicas in the greenest-first fill
        around the pinned ones, and the intensity of the dirtiest that does."""
        row, caps, v = self.pinned[t], self.caps, self.values[t]
        left = self.need[t] - sum(row)
        holds = [False] * len(caps)
        last = 0.0
        for i in self.order[t]:
            if left <= 0:
                break
            n = min(left, caps[i] - row[i])
            if n > 0:
                holds[i] = True
                last = v[i]
                left -= n
        return holds, last

    def _place(self, inst: Instance, count: int) -> list[int]:
        """Pin ``count`` replicas of ``inst`` one at a time where each adds the least."""
        counts = [0] * len(self.caps)
        hours = range(inst.arrive, inst.leave)
        for _ in range(count):
            cost = [0.0] * len(self.caps)
            room = [True] * len(self.caps)
            for t in hours:
                holds, last = self._marginal(t)
                row, v = self.pinned[t], self.values[t]
                for i in range(len(cost)):
                    if row[i] >= self.caps[i]:
                        room[i] = False
                    elif not holds[i]:
                        cost[i] += v[i] - last
            fits = [i for i in range(len(cost)) if room[i]]
            if not fits:
                raise ValueError(f"no cluster has room for {inst.uid} all its life")
            best = min(fits, key=lambda i: (cost[i], self.clusters[i]))
            counts[best] += 1
            for t in hours:
                self.pinned[t][best] += 1
        return counts

    def account(self, t: int, kw: float) -> None:
        row, caps, v = self.pinned[t], self.caps, self.values[t]
        day = t // 24
        used = list(row)
        left = self.need[t] - sum(row)
        for i in self.order[t]:
            if left <= 0:
                break
            n = min(left, caps[i] - row[i])
            if n > 0:
                used[i] += n
                left -= n
        total = 0.0
        for i, n in enumerate(used):
            if n:
                total += n * v[i]
                self.run.daily_share[self.clusters[i]][day] += n
        self.run.hourly[t] = total * kw
        self.run.moves += fewest_moves(self.last, used)
        self.last = used


def _filled(
    intent: Fill,
    replicas: int,
    free: Mapping[str, int],
    mine: Mapping[str, int],
    *,
    start: int,
    fresh: bool,
    desc: bool,
) -> tuple[dict[str, int], int] | None:
    """An ordered fill divided as Karmada does (tiers, or failover groups from ``start``);
    None when it cannot hold every replica."""
    others = {c: free[c] - mine.get(c, 0) for c in free}
    if intent.groups:
        return group_fill(
            replicas, intent.tiers, others, mine, start=start, fresh=fresh, descending=desc
        )
    filled = tier_fill(replicas, intent.tiers, others, mine, descending=desc)
    return None if filled is None else (filled, 0)


def _rescheduled_from(old: Intent, new: Intent, observed: int) -> int | None:
    """Failover groups rewritten: the term Karmada reschedules from (the observed one
    while the new placement still has it, else 0), or None when the observed term is
    unchanged, which Karmada's scheduler does not reschedule (``placementChanged``,
    v1.16); any other intent: 0."""
    if not (isinstance(new, Fill) and new.groups):
        return 0
    if not (isinstance(old, Fill) and old.groups) or observed >= len(new.tiers):
        return 0
    before, after = groups_of(old.tiers), groups_of(new.tiers)
    if observed < len(before) and set(before[observed]) == set(after[observed]):
        return None
    return observed


def _lowest(inst: Instance) -> int:
    """The replicas an immovable instance keeps where it was created all its life."""
    if inst.daily_low is None:
        return inst.replicas
    return min(inst.replicas_at(h) for h in range(inst.arrive, min(inst.leave, inst.arrive + 24)))


def _mean_outlook(
    method: Method, history: Sequence[float], horizon: int, days: int, at: int
) -> float:
    return ranking_value(outlook(method, history, horizon - 1, days=days, at=at))


def _yardstick(
    scenario: Scenario, fleets: Sequence[_Fleet], caps: Mapping[str, int]
) -> tuple[_Fleet | None, list[_Fleet]]:
    """The greedy operator's fleet, whose moves set the move budget (None: no solver for
    the budget oracle), and the fleets to run unseen: greedy's when it is not compared."""
    names = [c.name for c in scenario.clusters]
    policy = greedy(scenario.compare, names)
    mine = next((f for f in fleets if f.policy.key == policy.key), None)
    if mine is not None or not budget_mod.available():
        return mine, []
    mine = _Fleet(policy, names, caps, scenario.hours, Role.POLICY)
    return mine, [mine]


def simulate_spatial(
    scenario: Scenario,
    grid: Grid,
    policies: Sequence[SpatialPolicy] | None = None,
    tick: Tick = _no_tick,
) -> list[Run]:
    """Runs of the baseline, every policy, the budget oracle (when scipy, the ``sim``
    extra, is installed), the free oracle and the constrained oracle (in that order)."""
    hours = scenario.hours
    names = [c.name for c in scenario.clusters]
    zone_of = {c.name: c.zone for c in scenario.clusters}
    items = instances(scenario)
    need = demand(items, hours)
    caps = capacities(scenario, max(need, default=0))
    if policies is None:
        policies = spatial_policies(scenario.policy, scenario.compare, names, zone_of)
    fleets = [
        _Fleet(p, names, caps, hours, Role.BASELINE if i == 0 else Role.POLICY)
        for i, p in enumerate(policies)
    ]
    greedy_fleet, unseen = _yardstick(scenario, fleets, caps)
    free = _Oracle(names, caps, hours)
    zone_hours = [[grid.values[zone_of[n]][t] for n in names] for t in range(hours)]
    pinned = [i for i in items if not i.movable]
    oracle = _ConstrainedOracle(names, caps, need, zone_hours, pinned)
    arrivals: dict[int, list[Instance]] = {}
    departures: dict[int, list[Instance]] = {}
    for inst in items:
        arrivals.setdefault(inst.arrive, []).append(inst)
        departures.setdefault(inst.leave, []).append(inst)
    kw = scenario.power_kw
    days = scenario.compare.forecast_days
    for t in range(hours):
        by_zone = {z: grid.values[z][t] for z in grid.values}
        current = {n: by_zone[zone_of[n]] for n in names}
        views: dict[tuple[Method | None, int], dict[str, float]] = {(None, 1): current}
        leaving = departures.get(t, ())
        arriving = arrivals.get(t, ())
        reevaluate = t % scenario.interval_hours == 0
        for fleet in [*fleets, *unseen]:
            policy = fleet.policy
            key = (policy.forecast, policy.horizon_hours if policy.forecast else 1)
            view = views.get(key)
            if view is None and policy.forecast is not None:
                method, horizon = policy.forecast, key[1]
                length = history_needed(method, horizon, days=days)
                zone_view = {
                    z: _mean_outlook(method, grid.history(z, t, length), horizon, days, t)
                    for z in grid.values
                }
                view = views[key] = {n: zone_view[zone_of[n]] for n in names}
            assert view is not None
            for inst in leaving:
                fleet.release(inst)
            fleet.rescale(t)
            # Admission and the leader's re-evaluation rank on the same view (the forecast
            # mean, when the policy has one: the webhook's ``Context.ranked``).
            for inst in arriving:
                fleet.place(inst, view, t)
            if policy.reevaluate and reevaluate and fleet.active:
                fleet.revisit(view, t)
            fleet.account(t, current, kw)
        free.account(t, current, need[t], kw)
        oracle.account(t, kw)
        tick(1)
    runs = [f.run for f in fleets]
    if greedy_fleet is not None:  # the target's budget: a share of greedy's moves
        allowed = budget_mod.move_budget(greedy_fleet.run.moves)
        runs.append(
            budget_oracle(oracle, items, zone_hours, allowed, kw, greedy=greedy_fleet.run.moves)
        )
    return [*runs, free.run, oracle.run]


def constrained_and_budget(scenario: Scenario, grid: Grid, budget: int | None) -> tuple[Run, Run]:
    """The constrained oracle's run and the budget oracle's with ``budget`` moves (None:
    unlimited), without the policies."""
    hours = scenario.hours
    names = [c.name for c in scenario.clusters]
    zone_of = {c.name: c.zone for c in scenario.clusters}
    items = instances(scenario)
    need = demand(items, hours)
    caps = capacities(scenario, max(need, default=0))
    values = [[grid.values[zone_of[n]][t] for n in names] for t in range(hours)]
    oracle = _ConstrainedOracle(names, caps, need, values, [i for i in items if not i.movable])
    for t in range(hours):
        oracle.account(t, scenario.power_kw)
    return oracle.run, budget_oracle(oracle, items, values, budget, scenario.power_kw)


BUDGET_ORACLE = "oracle-budget"
"""Key of the budget oracle: the constrained oracle within the spatial target's move
budget (:mod:`webhook.simulate.budget`)."""


def budget_oracle(
    oracle: _ConstrainedOracle,
    items: Sequence[Instance],
    values: Sequence[Sequence[float]],
    budget: int | None,
    kw: float,
    *,
    greedy: int | None = None,
) -> Run:
    """The budget oracle's run: the movable replicas scheduled with perfect knowledge and
    at most ``budget`` moves (None: unlimited), and the immovable ones pinned where that
    schedule does best, by :func:`webhook.simulate.budget.schedule`; ``oracle`` gives the
    clusters and their capacities."""
    hours = len(values)
    clusters, caps = oracle.clusters, oracle.caps
    lives: list[budget_mod.Life] = []
    pinned: list[budget_mod.Pinned] = []
    for inst in items:
        low = 0 if inst.movable else _lowest(inst)
        if low:
            pinned.append((inst.arrive, min(inst.leave, hours), low))
        series = [inst.replicas_at(t) - low for t in range(inst.arrive, inst.leave)]
        if any(series):
            lives.append((inst.arrive, series))
    room = [list(caps) for _ in range(hours)]
    work = budget_mod.fleet(lives, hours)
    plan = budget_mod.schedule(room, values, work, budget, pinned=pinned)
    days = (hours + 23) // 24
    allowed = "unlimited" if budget is None else f"{budget} in all"
    run = Run(
        BUDGET_ORACLE,
        "budget oracle: perfect knowledge, capacity and movable: false respected, "
        f"at most {budget_mod.MOVE_BUDGET_SHARE:.0%} of greedy's replica moves ({allowed})",
        Role.BUDGET_ORACLE,
        "perfect (future known)",
        array("d", bytes(8 * hours)),
        moves=round(plan.moves),
        daily_share={c: array("d", bytes(8 * days)) for c in clusters},
    )
    nothing = [0.0] * len(clusters)
    for t in range(hours):
        day, v, mine = t // 24, values[t], plan.counts[t]
        row = plan.pinned[t] if plan.pinned else nothing
        total = 0.0
        for i, name in enumerate(clusters):
            n = row[i] + mine[i]
            if n:
                total += n * v[i]
                run.daily_share[name][day] += n
        run.hourly[t] = total * kw
    run.details = {
        "greedy_moves": greedy,
        "move_budget": budget,
        "moves": plan.moves,
        "optimal": plan.optimal,
        "lower_bound_kg": plan.bound * kw / 1000.0,
    }
    return run


# --- temporal ------------------------------------------------------------------------------


def _arrivals(pool: BatchPool, hours: int) -> list[int]:
    """Arrival hours of the pool's jobs whose whole window lies inside the scenario."""
    last = hours - pool.slack_hours - pool.length_hours
    return list(range(0, last + 1, pool.every_hours))


def _prefix(values: Sequence[float]) -> list[float]:
    out = [0.0]
    for v in values:
        out.append(out[-1] + v)
    return out


def _run_job(
    run: Run,
    values: Sequence[float],
    start: int,
    pool: BatchPool,
    kw: float,
    *,
    arrive: int,
    late: bool = False,
) -> None:
    """Charge one job started at ``start`` to the hours it runs (``run.hourly``) and to the
    hour it arrived (``run.by_arrival``); a ``late`` job is charged to its arrival hour at
    no less than running on arrival would have emitted."""
    start = min(start, len(values) - pool.length_hours)
    grams = 0.0
    for h in range(start, start + pool.length_hours):
        emitted = pool.replicas * values[h] * kw
        run.hourly[h] += emitted
        grams += emitted
    if late:
        on_arrival = math.fsum(values[arrive : arrive + pool.length_hours])
        grams = max(grams, pool.replicas * on_arrival * kw)
    run.by_arrival[arrive] += grams


def _history(values: Sequence[float], hour: int, length: int) -> Sequence[float]:
    """The last ``length`` values up to and including ``hour``."""
    return values[max(0, hour + 1 - length) : hour + 1]


def _starts(share: float, pending: int, credit: float) -> tuple[int, float]:
    """How many of the ``pending`` jobs a pool at ``share`` of its limit starts this hour
    (the most urgent first), and the fraction of a job carried to the next hour.

    The whole limit starts every pending job, 0 none; a share in between starts that
    share of them, the fractions adding up from hour to hour while the share stays
    between (a pool at 0.5 with one job pending starts it every other hour)."""
    if share >= 1.0:
        return pending, 0.0
    if share <= 0.0:
        return 0, 0.0
    credit += share * pending
    starting = min(pending, int(credit + 1e-9))
    return starting, credit - starting


def _pool_policy(
    policy: PausePolicy, pool: BatchPool, values: Sequence[float], run: Run, kw: float
) -> None:
    hours = len(values)
    reset = getattr(policy.paused, "reset", None)
    if callable(reset):  # a rule with state (webhook.simulate.pausing): one pool at a time
        reset()
    queue = _arrivals(pool, hours)
    nxt = 0
    pending: list[int] = []
    share = 1.0
    credit = 0.0
    for t in range(hours):
        while nxt < len(queue) and queue[nxt] == t:
            pending.append(queue[nxt])
            nxt += 1
        if not pending:
            continue
        urgency = pending[0] + pool.slack_hours - t
        moment = PoolMoment(
            t,
            values[t],
            max(urgency, 0),
            pool.length_hours,
            functools.partial(_history, values, t),
        )
        now_share = policy.share_at(moment)
        if policy.deadline_guard and urgency <= 0:
            now_share = 1.0
        if now_share != share:
            run.changes += 1
            share = now_share
        starting, credit = _starts(share, len(pending), credit)
        for arrive in pending[:starting]:
            late = t > arrive + pool.slack_hours
            run.wait_hours += t - arrive
            run.misses += late
            _run_job(run, values, t, pool, kw, arrive=arrive, late=late)
        run.jobs += starting
        del pending[:starting]
    for arrive in pending:  # never unpaused before the data ends
        run.jobs += 1
        run.misses += 1
        run.wait_hours += hours - pool.length_hours - arrive
        _run_job(run, values, hours - pool.length_hours, pool, kw, arrive=arrive, late=True)


def _pool_oracle(pool: BatchPool, values: Sequence[float], run: Run, kw: float) -> None:
    sums = _prefix(values)
    length = pool.length_hours
    for arrive in _arrivals(pool, len(values)):
        best = min(
            range(arrive, arrive + pool.slack_hours + 1),
            key=lambda s: (sums[s + length] - sums[s], s),
        )
        run.jobs += 1
        run.wait_hours += best - arrive
        _run_job(run, values, best, pool, kw, arrive=arrive)


def _pool_free_oracle(pool: BatchPool, values: Sequence[float], run: Run, kw: float) -> None:
    """Each job's hours at the greenest hours of its window, split if need be (no job may
    be interrupted, so this bounds what any start time can save)."""
    length = pool.length_hours
    for arrive in _arrivals(pool, len(values)):
        window = range(arrive, arrive + pool.slack_hours + length)
        picked = sorted(window, key=lambda h: (values[h], h))[:length]
        grams = 0.0
        for h in picked:
            emitted = pool.replicas * values[h] * kw
            run.hourly[h] += emitted
            grams += emitted
        run.jobs += 1
        run.wait_hours += min(picked) - arrive
        run.by_arrival[arrive] += grams


def simulate_batch(
    scenario: Scenario,
    grid: Grid,
    policies: Sequence[PausePolicy] | None = None,
    tick: Tick = _no_tick,
) -> list[Run]:
    """Runs of the baseline, every pause policy, the free oracle (jobs split) and the
    perfect-foresight oracle (each job whole at its greenest start)."""
    hours = scenario.hours
    lineup = (
        list(policies)
        if policies is not None
        else batch_policies(scenario.policy, scenario.compare)
    )
    runs = [
        Run(p.key, p.label, Role.BASELINE if i == 0 else Role.POLICY, p.info, array("d"))
        for i, p in enumerate(lineup)
    ]
    free = Run(
        FREE_ORACLE,
        "free oracle: perfect foresight, each job split across the greenest hours of its "
        "window (upper bound)",
        Role.FREE_ORACLE,
        "perfect (future known)",
        array("d"),
    )
    oracle = Run(
        ORACLE,
        "constrained oracle: perfect foresight, each job whole at its greenest start",
        Role.ORACLE,
        "perfect (future known)",
        array("d"),
    )
    for run in [*runs, free, oracle]:
        run.hourly = array("d", bytes(8 * hours))
        run.by_arrival = array("d", bytes(8 * hours))
    kw = scenario.power_kw
    for pool in scenario.batch:
        values = grid.values[pool.zone]
        for policy, run in zip(lineup, runs, strict=True):
            _pool_policy(policy, pool, values, run, kw)
            tick(1)
        _pool_free_oracle(pool, values, free, kw)
        _pool_oracle(pool, values, oracle, kw)
        tick(1)
    return [*runs, free, oracle]
