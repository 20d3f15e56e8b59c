"""The budget oracle: the least emissions within the spatial target's move budget.

The spatial target allows a policy at most :data:`MOVE_BUDGET_SHARE` of the greedy top-N
operator's replica moves over the same run (:func:`move_budget`). The constrained oracle
moves for free, so it follows every daily crossing of two grids that no policy within
that budget can follow. The budget oracle says what the best placement within the budget
reaches: the scenario's capacities, the pinned work placed once, at arrival, wherever it
does best, perfect knowledge of every hour, and at most ``budget`` replica moves over
the whole run.

What it solves: the movable replicas as the fleet's count per cluster and hour
``x[t][c]`` (summing to the hour's movable demand), and where each immovable instance
is pinned, ``q[j][c]`` of its replicas on each cluster for its whole life (summing to
its count; pinning at arrival is no move, for any policy), within each cluster's
capacity every hour, minimising the emissions of both subject to ``sum_t moves_t <=
budget``, ``moves_t`` being :func:`webhook.simulate.metrics.moved` (the rule every
policy's moves are counted by) from the hour before: the replicas that left a cluster
beyond those that left the fleet (an instance gone, a scale-down; the oracle takes them
from wherever the fleet shrinks). Where the pinned work goes is the oracle's choice, as
it is every policy's: pinned where the constrained oracle pins it (greenest over its
life with free moves around it), a daily job can take the room the movable replicas
hold every day, which costs moves within a budget. An integer program; its linear
relaxation (HiGHS, ``scipy.optimize.milp``: the ``sim`` extra) is a lower bound and,
when its schedule is whole, the optimum; otherwise HiGHS solves the integer program
(:class:`Plan` keeps whether it proved the optimum and the bound).

Moves are counted on the fleet's counts: a replica of one workload leaving a cluster
while one of another workload (new, or scaled up) arrives there is no move. Counted per
workload, as a policy's moves are, the same placement can take more, so the budget
oracle is a lower bound on the emissions of any placement within the budget counted
that way: a policy's share of it understates, never overstates, how close the policy
comes (with one lane per workload instead of the fleet, ``spatial-saturated-2023``'s
year emits 0.0003 % more; docs/results.md).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
from collections.abc import Sequence
from typing import Any

from webhook.simulate.metrics import moved

MOVE_BUDGET_SHARE = 0.10
"""The spatial target's move budget: this share of the greedy top-N operator's replica
moves over the same run (docs/results.md, "Target")."""

TIME_LIMIT_SECONDS = 120.0
"""HiGHS's time limit for one schedule; a schedule stopped by it keeps its stated gap."""

REL_GAP = 1e-6
"""HiGHS's relative gap at which a schedule counts as optimal."""


def move_budget(greedy_moves: int) -> int:
    """Replica moves the spatial target allows over a run in which the greedy top-N
    operator made ``greedy_moves``."""
    return math.floor(MOVE_BUDGET_SHARE * greedy_moves + 1e-9)


def available() -> bool:
    """Whether the solver (scipy, the ``sim`` extra) is installed."""
    return importlib.util.find_spec("scipy") is not None


@dataclasses.dataclass(frozen=True, slots=True)
class Plan:
    """The movable replicas' schedule within the budget."""

    counts: list[list[float]]
    """Per hour, the movable replicas on each cluster (in the clusters' order): whole,
    except when HiGHS found no whole schedule in its time limit (then the relaxation's)."""
    cost: float
    """``sum(counts[t][c] * values[t][c])`` of the schedule."""
    bound: float
    """A lower bound on that cost for any schedule within the budget (the linear
    relaxation's optimum); equal to ``cost`` when the schedule is optimal."""
    moves: float
    """Moves of the schedule counted on the fleet's counts (at most the budget)."""
    optimal: bool
    """Whether the schedule is proven optimal: the relaxation's own schedule is whole,
    or HiGHS closed the gap to :data:`REL_GAP` (else it stopped at its time limit)."""
    pinned: list[list[float]] = dataclasses.field(default_factory=list)
    """Per hour, the immovable replicas on each cluster where the schedule pins them
    (empty: nothing pinned)."""


Life = tuple[int, Sequence[int]]
"""One instance's movable replicas: the hour it arrives and its count in each hour of its
life."""

Pinned = tuple[int, int, int]
"""One immovable instance: the hour it arrives, the hour it leaves and the replicas it
keeps where it was created all its life."""


@dataclasses.dataclass(frozen=True, slots=True)
class Lane:
    """Instances of one workload that never overlap, one after another: per hour the
    replicas present (0 between instances) and those that left since the hour before
    (a scale-down, or every replica of an instance gone)."""

    demand: list[int]
    removed: list[int]


def fleet(lives: Sequence[Life], hours: int) -> Lane:
    """The fleet's movable replicas as one lane: per hour the sum over the instances
    (``lives``), and the replicas that left since the hour before (scale-downs, and every
    replica of an instance gone), which the oracle may take from wherever it likes."""
    lane = Lane([0] * hours, [0] * hours)
    for arrive, series in lives:
        leave = arrive + len(series)
        for k, n in enumerate(series):
            lane.demand[arrive + k] += n
            if k:
                lane.removed[arrive + k] += max(0, series[k - 1] - n)
        if series and leave < hours:
            lane.removed[leave] += series[-1]
    return lane


def schedule(
    room: Sequence[Sequence[int]],
    values: Sequence[Sequence[float]],
    work: Lane,
    budget: int | None,
    *,
    pinned: Sequence[Pinned] = (),
    time_limit: float = TIME_LIMIT_SECONDS,
) -> Plan:
    """The least-emitting schedule of ``work``'s movable replicas and of where the
    ``pinned`` instances go, within ``room[t][c]`` per cluster, priced ``values[t][c]``
    each, with at most ``budget`` moves over the run (None: no limit), counted by
    :func:`webhook.simulate.metrics.moved`. Raises ValueError when no schedule fits."""
    from scipy import optimize  # noqa: PLC0415 - the sim extra

    hours = len(room)
    n = len(room[0]) if hours else 0
    if not (hours and n):
        return Plan([[0.0] * n for _ in range(hours)], 0.0, 0.0, 0, True)
    program = _program(room, values, work, budget, pinned)
    # The linear relaxation first: a lower bound, and the optimum itself when its
    # schedule is whole (one flow with one budget row almost always is).
    result = optimize.milp(program.cost, constraints=program.rows, bounds=program.bounds)
    if result.x is None:
        raise ValueError(f"no schedule within the budget: {result.message}")
    relaxed = float(result.fun)
    nx, size = hours * n, len(program.cost)
    nq = len(pinned) * n
    whole_ones = [*range(nx), *range(size - nq, size)]
    whole = bool(all(abs(result.x[i] - round(result.x[i])) < 1e-6 for i in whole_ones))
    optimal = whole
    flat: list[float] = [float(v) for v in result.x[:nx]]
    placed: list[float] = [float(v) for v in result.x[size - nq :]]
    if not whole:
        integrality = [1] * nx + [0] * (size - nx - nq) + [1] * nq
        found = optimize.milp(
            program.cost, constraints=program.rows, bounds=program.bounds,
            integrality=integrality, options={"time_limit": time_limit, "mip_rel_gap": REL_GAP},
        )  # fmt: skip
        dual = getattr(found, "mip_dual_bound", None)
        if dual is not None and math.isfinite(dual):
            relaxed = max(relaxed, float(dual))
        if found.x is not None and found.status == 0:
            optimal = True
            flat = [float(round(v)) for v in found.x[:nx]]
            placed = [float(round(v)) for v in found.x[size - nq :]]
        # else: no whole schedule proven best within the time limit (HiGHS may hold a
        # worse one); the relaxation's (fractional replicas) stands for it, its emissions
        # the lower bound, not a placement, so no row's share of it can overstate.
    if optimal:
        flat = [float(round(v)) for v in flat]
        placed = [float(round(v)) for v in placed]
    counts = [flat[t * n : (t + 1) * n] for t in range(hours)]
    held = _held(pinned, placed, hours, n)
    spent = sum(
        moved(dict(enumerate(counts[t - 1])), dict(enumerate(counts[t])), work.removed[t])
        for t in range(1, hours)
    )
    total = math.fsum(
        (counts[t][c] + (held[t][c] if held else 0.0)) * float(values[t][c])
        for t in range(hours)
        for c in range(n)
    )
    slack = _EPS * (budget if budget is not None else spent)
    return Plan(counts, total, min(total, relaxed - slack), spent, optimal, held)


def _held(
    pinned: Sequence[Pinned], placed: Sequence[float], hours: int, n: int
) -> list[list[float]]:
    """Per hour, the pinned replicas on each cluster (``placed``: per instance, per cluster)."""
    if not pinned:
        return []
    held = [[0.0] * n for _ in range(hours)]
    for j, (arrive, leave, _) in enumerate(pinned):
        for t in range(arrive, min(leave, hours)):
            row = held[t]
            for c in range(n):
                row[c] += placed[j * n + c]
    return held


_EPS = 1e-6
"""The price of a move in the program: among equally green schedules, the fewest moves."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Program:
    cost: Any
    rows: Any
    bounds: Any


def _program(
    room: Sequence[Sequence[int]],
    values: Sequence[Sequence[float]],
    work: Lane,
    budget: int | None,
    pinned: Sequence[Pinned] = (),
) -> _Program:
    """The program's variables: ``x[t][c]`` (replicas), ``p[t][c]`` (what cluster *c*
    lost at hour *t* >= 1), ``m[t]`` (moves at hour *t* >= 1) and ``q[j][c]`` (pinned
    instance *j*'s replicas on cluster *c*), in that order."""
    import numpy as np  # noqa: PLC0415 - the sim extra
    from scipy import optimize, sparse  # noqa: PLC0415 - the sim extra

    hours, n = len(room), len(room[0])
    steps = hours - 1
    nx, npv, nq = hours * n, steps * n, len(pinned) * n
    size = nx + npv + steps + nq
    demand = np.asarray(work.demand, dtype=float)
    prices = np.asarray(values, dtype=float)
    sums = np.vstack([np.zeros((1, n)), np.cumsum(prices, axis=0)])
    life = [sums[min(leave, hours)] - sums[arrive] for arrive, leave, _ in pinned]
    cost = np.concatenate(
        [
            prices.reshape(-1),
            np.zeros(npv),
            np.full(steps, _EPS),
            np.concatenate(life) if life else np.zeros(0),
        ]
    )
    upper = np.full(size, np.inf)
    upper[:nx] = np.minimum(np.asarray(room, dtype=float), demand[:, None]).reshape(-1)
    x = np.arange(nx).reshape(hours, n)
    p = nx + np.arange(npv).reshape(steps, n)
    m = nx + npv + np.arange(steps)
    q = nx + npv + steps + np.arange(nq).reshape(len(pinned), n)
    parts: list[tuple[Any, Any, Any]] = []  # (row, column, coefficient) triples
    low: list[Any] = []
    high: list[Any] = []

    def add(entries: Sequence[tuple[Any, Any, float]], lo: Any, hi: Any, count: int) -> None:
        first = sum(len(b) for b in low)
        for row, col, coef in entries:
            parts.append((first + row, col.reshape(-1), np.full(col.size, coef)))
        low.append(np.broadcast_to(np.asarray(lo, dtype=float), (count,)).copy())
        high.append(np.broadcast_to(np.asarray(hi, dtype=float), (count,)).copy())

    # Every hour's movable demand.
    add([(np.repeat(np.arange(hours), n), x, 1.0)], demand, demand, hours)
    if pinned:
        # Every pinned instance whole, somewhere; then each cluster's room every hour.
        counts = np.asarray([count for _, _, count in pinned], dtype=float)
        add([(np.repeat(np.arange(len(pinned)), n), q, 1.0)], counts, counts, len(pinned))
        cells = np.arange(nx).reshape(hours, n)
        entries: list[tuple[Any, Any, float]] = [(cells.reshape(-1), x, 1.0)]
        for j, (arrive, leave, _) in enumerate(pinned):
            span = np.arange(arrive, min(leave, hours))
            entries.append((cells[span].reshape(-1), np.tile(q[j], span.size), 1.0))
        add(entries, -np.inf, np.asarray(room, dtype=float).reshape(-1), nx)
    if steps:
        # p[t][c] >= x[t-1][c] - x[t][c].
        each = np.arange(npv)
        add([(each, p, 1.0), (each, x[1:], 1.0), (each, x[:-1], -1.0)], 0.0, np.inf, npv)
        # m[t] >= sum_c p[t][c] - removed[t].
        removed = np.asarray(work.removed[1:], dtype=float)
        add(
            [(np.repeat(np.arange(steps), n), p, 1.0), (np.arange(steps), m, -1.0)],
            -np.inf, removed, steps,
        )  # fmt: skip
        if budget is not None:
            add([(np.zeros(steps, dtype=int), m, 1.0)], -np.inf, float(budget), 1)
    matrix = sparse.csr_array(
        (
            np.concatenate([c for _, _, c in parts]),
            (np.concatenate([r for r, _, _ in parts]), np.concatenate([k for _, k, _ in parts])),
        ),
        shape=(sum(len(b) for b in low), size),
    )
    return _Program(
        cost,
        optimize.LinearConstraint(matrix, np.concatenate(low), np.concatenate(high)),
        optimize.Bounds(np.zeros(size), upper),
    )
