"""What one policy did in a simulation, and the comparison metrics derived from it.

Savings are ratio-of-sums over the same work and hours: ``1 - E_policy / E_baseline``;
the share of an oracle's saving captured is ``(E_baseline - E_policy) /
(E_baseline - E_oracle)``, against the constrained oracle (the target: the scenario's
capacities, ``movable: false`` and deadlines respected), against the free one (the
upper bound) and, spatial, against the budget oracle (the constrained one within the
target's move budget).
"""

from __future__ import annotations

import dataclasses
import math
from array import array
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import TypeVar

K = TypeVar("K")
N = TypeVar("N", int, float)


class Role(StrEnum):
    """How a run takes part in the comparison."""

    BASELINE = "baseline"
    POLICY = "policy"
    ORACLE = "oracle"
    """The constrained oracle: perfect knowledge within the scenario's constraints."""
    FREE_ORACLE = "free-oracle"
    """The free oracle: the upper bound, which ignores ``movable: false`` (and splits
    batch jobs)."""
    BUDGET_ORACLE = "budget-oracle"
    """The budget oracle (spatial): perfect knowledge within the scenario's constraints
    and the spatial target's move budget (:mod:`webhook.simulate.budget`)."""


@dataclasses.dataclass(slots=True)
class Run:
    """Raw outcome of one policy over the simulated hours."""

    key: str
    label: str
    role: Role
    info: str
    """Intensity information the policy used."""
    hourly: array[float]
    """gCO2eq emitted in each simulated hour."""
    moves: int = 0
    """Replicas that changed cluster after creation (spatial)."""
    changes: int = 0
    """Placement updates: PropagationPolicy rewrites or NodePool pause toggles."""
    rebalances: int = 0
    """Fresh reschedules the leader asked for to move replicas back (ordered fill)."""
    jobs: int = 0
    misses: int = 0
    """Batch jobs that started after their latest start (finished past the deadline)."""
    wait_hours: int = 0
    """Sum over batch jobs of the hours waited before starting."""
    daily_share: Mapping[str, array[float]] = dataclasses.field(default_factory=dict)
    """Replica-hours per cluster (or pool) per day."""
    details: Mapping[str, float | int | bool | None] = dataclasses.field(default_factory=dict)
    """What an oracle states about itself beyond its emissions (the budget oracle's budget,
    bound and moves counted per workload: :mod:`webhook.simulate.budget`)."""
    by_arrival: array[float] = dataclasses.field(default_factory=lambda: array("d"))
    """Batch runs: gCO2eq of the jobs that arrived in each hour, wherever they ran, so every
    run's series covers the same jobs at every hour (a job that missed its deadline counts
    at least what it would have emitted on arrival: no saving from a broken deadline).
    Empty for spatial runs, where every run serves the same replicas each hour."""

    @property
    def total(self) -> float:
        """gCO2eq over the whole run."""
        return math.fsum(self.hourly)


@dataclasses.dataclass(frozen=True, slots=True)
class Row:
    """One line of the results table."""

    key: str
    label: str
    role: str
    info: str
    total_kg: float
    saved_pct: float
    captured_pct: float | None
    """Share of the constrained oracle's saving; None when it saves nothing."""
    captured_free_pct: float | None
    """Share of the free oracle's (the upper bound's) saving; None when it saves nothing
    or did not run."""
    captured_budget_pct: float | None
    """Share of the budget oracle's saving (spatial); None when it saves nothing or did
    not run."""
    moves_per_day: float
    """Replica moves a day; the constrained and the free oracle, which re-place every hour,
    count the fewest their hour-to-hour placements need (:func:`fewest_moves`)."""
    changes_per_day: float | None
    """None for the oracles: they write no policy object (the budget oracle neither)."""
    misses: int
    jobs: int
    mean_wait_hours: float


def moved(before: Mapping[K, N], after: Mapping[K, N], removed: N) -> N:
    """Replicas that changed cluster from placement ``before`` to ``after`` (replica counts
    per cluster): each counts one move. ``removed`` replicas left between the two (an
    instance gone, a scale-down) and are taken from where the placement shrank first."""
    shrank = sum(
        (max(n - n, n - after.get(c, n - n)) for c, n in before.items()), removed - removed
    )
    return max(shrank - shrank, shrank - removed)


def fewest_moves(before: Sequence[int], after: Sequence[int]) -> int:
    """The fewest replicas that change cluster from per-cluster counts ``before`` to
    ``after`` (same cluster order), replicas being alike: what the placement gained
    anywhere, less what new replicas can fill (how the oracles' moves are counted; they
    re-place every hour and name no replica)."""
    gained = sum(max(0, a - b) for a, b in zip(after, before, strict=True))
    return gained - max(0, sum(after) - sum(before))


def compare(runs: Sequence[Run], hours: int) -> list[Row]:
    """Rows for ``runs``, relative to the one baseline and the oracles among them."""
    baseline = next(r for r in runs if r.role is Role.BASELINE).total
    oracle = next(r for r in runs if r.role is Role.ORACLE).total
    free = next((r.total for r in runs if r.role is Role.FREE_ORACLE), None)
    budget = next((r.total for r in runs if r.role is Role.BUDGET_ORACLE), None)
    days = hours / 24

    def share(total: float, target: float | None) -> float | None:
        if target is None:
            return None
        gap = baseline - target
        return 100.0 * (baseline - total) / gap if gap > 1e-9 * max(baseline, 1) else None

    rows = []
    for run in runs:
        total = run.total
        # The oracles write no policy: they count moves, not updates.
        counts_updates = run.role in (Role.BASELINE, Role.POLICY)
        saved = 100.0 * (1 - total / baseline) if baseline else 0.0
        rows.append(
            Row(
                key=run.key,
                label=run.label,
                role=run.role.value,
                info=run.info,
                total_kg=total / 1000.0,
                saved_pct=saved,
                captured_pct=share(total, oracle),
                captured_free_pct=share(total, free),
                captured_budget_pct=share(total, budget),
                moves_per_day=run.moves / days,
                changes_per_day=run.changes / days if counts_updates else None,
                misses=run.misses,
                jobs=run.jobs,
                mean_wait_hours=run.wait_hours / run.jobs if run.jobs else 0.0,
            )
        )
    return rows
