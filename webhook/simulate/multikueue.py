"""Batch across clusters: Kueue MultiKueue jobs replayed through the product's rules.

A scenario's ``multikueue`` section is a MultiKueue manager and its workers (a grid zone
and a ClusterQueue cpu quota each). Jobs arrive over the scenario (:func:`draw`: Poisson
arrivals, sizes, run times and ``carbonshift.io/max-delay`` drawn from a seed), each
needing its cpu for its whole run, and wait in the manager's queue (BestEffortFIFO: a
job that does not fit does not block the next). Every hour each policy walks the queue
in arrival order:

- ``kueue-default`` (the baseline): Kueue without carbonshift. A job starts at once on the
  first worker in config order that has quota for it.
- ``multikueue-forecast`` (carbonshift's default): the carbon window
  (:func:`webhook.decision.kueue.window`, judged on :func:`~webhook.decision.kueue.window_zone`)
  holds the job while a greener start is forecast within its delay, then the dispatcher
  (:func:`~webhook.decision.kueue.nominate`) nominates workers, greenest with room first,
  and the first nominated worker with quota admits it. The forecast is the one the
  NodePool pause runs on (``compare.forecast``, from the hours seen so far).
- ``multikueue-perfect``: the same rules on the true future (what the forecast's error
  costs).
- ``multikueue-place-only``: the dispatcher alone, no window (what placement alone saves).
- ``multikueue-order``: Kueue's incremental dispatcher over the carbon order carbonshift
  writes into ``MultiKueueConfig.spec.clusters`` (:func:`~webhook.decision.kueue.order`,
  the hysteresis section's margin and dwell), no window.
- ``oracle``: perfect knowledge of the intensities and of every arrival, same quotas and
  deadlines, jobs whole. Two greedy passes, one over the jobs in arrival order and one
  largest (cpu x hours) first, each job taking the (worker, start) with the lowest true
  emissions among those where it fits the quota for its whole run and starts by its
  deadline; the lower of the two totals. Greedy, not optimal (the optimum is an integer
  program): a bound for rules of that greedy family only, so a rule that packs better than
  both passes could score above 100 %.

A job's deadline is its arrival plus its max-delay (none: its arrival); a start after it is
a miss. Emissions: cpu x ``power_kw`` (per cpu) x the hourly intensities of the run.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import random
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import timedelta
from decimal import Decimal

from webhook.decision import kueue
from webhook.decision.forecast import Method, history_needed, outlook
from webhook.decision.hysteresis import Hysteresis
from webhook.model.config import KueueConfig
from webhook.simulate.grid import Grid
from webhook.simulate.metrics import Role, Run
from webhook.simulate.scenario import MultiKueue, Scenario

BASELINE = "kueue-default"
DEFAULT_MULTIKUEUE = "multikueue-forecast"
"""The row carbonshift's default behaviour stands for: the external dispatcher and the
carbon window on the leader's forecast."""
PERFECT = "multikueue-perfect"
PLACE_ONLY = "multikueue-place-only"
ORDER = "multikueue-order"
ORACLE = "oracle"
KEYS = (DEFAULT_MULTIKUEUE, PERFECT, PLACE_ONLY, ORDER)
"""The policy rows (baseline and oracle always run)."""
HOUR = timedelta(hours=1)


@dataclasses.dataclass(frozen=True, slots=True)
class SimJob:
    """One drawn job."""

    index: int
    arrive: int
    """Hour it is created (its Workload's creationTimestamp)."""
    cpu: int
    run: int
    """Run time, hours."""
    delay: int
    """``carbonshift.io/max-delay`` in hours (0: none)."""

    @property
    def deadline(self) -> int:
        """The latest start hour."""
        return self.arrive + self.delay


def _poisson(rng: random.Random, mean: float) -> int:
    """Knuth's draw (means are small: arrivals per hour)."""
    if mean > 30:  # normal approximation past where the product underflows slowly
        return max(0, round(rng.gauss(mean, math.sqrt(mean))))
    limit, k, product = math.exp(-mean), 0, rng.random()
    while product > limit:
        k += 1
        product *= rng.random()
    return k


def draw(section: MultiKueue, hours: int) -> list[SimJob]:
    """The scenario's jobs, in arrival order: the same seed, the same jobs. Only jobs
    whose whole window (deadline and run) lies inside the scenario arrive."""
    rng = random.Random(section.seed)  # noqa: S311 - a reproducible draw, not a secret
    mix = section.jobs
    out: list[SimJob] = []
    for hour in range(hours):
        for _ in range(_poisson(rng, mix.per_day / 24)):
            cpu, run = rng.choice(mix.cpu), rng.choice(mix.run_hours)
            delay = rng.choice(mix.max_delay_hours)
            if hour + delay + run <= hours:
                out.append(SimJob(len(out), hour, cpu, run, delay))
    return out


@dataclasses.dataclass(frozen=True, slots=True)
class World:
    """What every run replays: the workers, the intensities, the jobs, the power per cpu,
    and the product's settings."""

    section: MultiKueue
    grid: Grid
    jobs: Sequence[SimJob]
    kw: float
    kueue: KueueConfig
    """The product's ``kueue`` settings carbonshift's rows run under."""


# --- the account ------------------------------------------------------------------------------


class _Account:
    """One policy's run: quota in use per worker, releases, emissions, waits, misses."""

    def __init__(self, run: Run, world: World) -> None:
        section = world.section
        self.run = run
        self.grid = world.grid
        self.kw = world.kw
        self.quota = {w.name: w.cpu for w in section.workers}
        self.zone = {w.name: w.zone for w in section.workers}
        self.used = dict.fromkeys(self.quota, 0)
        self.ends: list[tuple[int, str, int]] = []

    def release(self, t: int) -> None:
        while self.ends and self.ends[0][0] <= t:
            _, name, cpu = heapq.heappop(self.ends)
            self.used[name] -= cpu

    def free(self, name: str) -> int:
        return self.quota[name] - self.used[name]

    def start(self, job: SimJob, name: str, t: int) -> None:
        self.used[name] += job.cpu
        heapq.heappush(self.ends, (t + job.run, name, job.cpu))
        values = self.grid.values[self.zone[name]]
        grams = 0.0
        for h in range(t, min(t + job.run, len(values))):
            emitted = job.cpu * self.kw * values[h]
            self.run.hourly[h] += emitted
            grams += emitted
        self.run.by_arrival[job.arrive] += grams
        self.run.jobs += 1
        self.run.wait_hours += t - job.arrive
        self.run.misses += t > job.deadline

    def workers(self) -> list[kueue.Worker]:
        """The workers as the product reads them: quota and reservation now."""
        return [
            kueue.Worker(n, self.zone[n], {"cpu": Decimal(q)}, {"cpu": Decimal(self.used[n])})
            for n, q in self.quota.items()
        ]


def _new_run(key: str, label: str, role: Role, info: str, hours: int) -> Run:
    run = Run(key, label, role, info, array("d", bytes(8 * hours)))
    run.by_arrival = array("d", bytes(8 * hours))
    return run


def _arrivals(jobs: Sequence[SimJob]) -> Iterator[tuple[int, list[SimJob]]]:
    i = 0
    while i < len(jobs):
        t = jobs[i].arrive
        batch = []
        while i < len(jobs) and jobs[i].arrive == t:
            batch.append(jobs[i])
            i += 1
        yield t, batch


def _leftover(account: _Account, pending: Sequence[SimJob], hours: int) -> None:
    """Jobs still queued when the data ends: started at the last hour that holds their run
    (a miss), so every run counts every job."""
    for job in pending:
        name = next(iter(account.quota))
        account.start(job, name, max(hours - job.run, job.arrive))


# --- the baseline ------------------------------------------------------------------------------


def _baseline(world: World, run: Run) -> None:
    grid, jobs = world.grid, world.jobs
    account = _Account(run, world)
    pending: list[SimJob] = []
    arrivals = dict(_arrivals(jobs))
    for t in range(grid.hours):
        account.release(t)
        pending.extend(arrivals.get(t, ()))
        keep = []
        for job in pending:
            name = next((n for n in account.quota if account.free(n) >= job.cpu), None)
            if name is None:
                keep.append(job)
            else:
                account.start(job, name, t)
        pending = keep
    _leftover(account, pending, grid.hours)


# --- the product's rules -----------------------------------------------------------------------

Outlook = Callable[[str, int], Sequence[float]]
"""``(zone, hour)`` -> ``[now, now+1 h, ...]`` over the horizon."""


def forecaster(grid: Grid, method: Method, days: int, horizon: int) -> Outlook:
    """The leader's forecast on ``method`` (a scenario's ``compare.forecast``) from the
    hours seen so far."""
    need = history_needed(method, horizon, days=days)

    def ahead(zone: str, t: int) -> Sequence[float]:
        return outlook(method, grid.history(zone, t, need), horizon, days=days, at=t)

    return ahead


def perfect(grid: Grid, horizon: int) -> Outlook:
    """The true future (what a perfect forecast would say)."""

    def ahead(zone: str, t: int) -> Sequence[float]:
        return grid.values[zone][t : t + horizon + 1]

    return ahead


def _job(sim: SimJob, grid: Grid) -> kueue.Job:
    """The Workload as :func:`webhook.decision.kueue.job_of` reads it."""
    return kueue.Job(
        "sim",
        f"job-{sim.index}",
        {"cpu": Decimal(sim.cpu)},
        sim.run * HOUR,
        grid.time(sim.arrive),
        max_delay=sim.delay * HOUR if sim.delay else None,
        quota_reserved=True,
    )


def _product(world: World, run: Run, ahead: Outlook, *, window: bool) -> None:
    """carbonshift's dispatcher (and, with ``window``, its admission check), hour by hour."""
    grid, jobs = world.grid, world.jobs
    account = _Account(run, world)
    zones = sorted(set(account.zone.values()))
    pending: list[tuple[SimJob, kueue.Job]] = []
    ready_since: dict[int, int] = {}
    arrivals = dict(_arrivals(jobs))
    for t in range(grid.hours):
        account.release(t)
        pending.extend((j, _job(j, grid)) for j in arrivals.get(t, ()))
        if not pending:
            continue
        now = grid.time(t)
        outlooks = {z: ahead(z, t) for z in zones}
        workers = account.workers()
        keep = []
        for sim, job in pending:
            if window and sim.index not in ready_since:
                checked, _ = kueue.admission(job, workers, outlooks, (), now)
                if not checked.ready:
                    keep.append((sim, job))
                    continue
            since = ready_since.setdefault(sim.index, t)
            rounds = int((t - since) * 3600 // world.kueue.round_seconds)
            nominated = kueue.nominate(
                job, workers, outlooks, (), rounds=rounds, step=world.kueue.step
            )
            name = next((n for n in nominated.names if account.free(n) >= sim.cpu), None)
            if name is None:
                keep.append((sim, job))
                continue
            account.start(sim, name, t)
            workers = account.workers()
        pending = keep
    _leftover(account, [s for s, _ in pending], grid.hours)


def _ordered(world: World, run: Run, ahead: Outlook, rule: Hysteresis) -> None:
    """Kueue's incremental dispatcher over the order carbonshift keeps in the
    MultiKueueConfig: within an hour every round has passed, so a job goes to the first
    worker in that order with quota."""
    section, grid, jobs = world.section, world.grid, world.jobs
    account = _Account(run, world)
    zones = sorted(set(account.zone.values()))
    current = [w.name for w in section.workers]
    since = 0
    hours = kueue.hours_of(timedelta(seconds=world.kueue.default_runtime_seconds))
    pending: list[SimJob] = []
    arrivals = dict(_arrivals(jobs))
    for t in range(grid.hours):
        account.release(t)
        outlooks = {z: ahead(z, t) for z in zones}
        new, _ = kueue.order(current, account.workers(), outlooks, t - since, rule, hours=hours)
        if new is not None:
            current, since = new, t
            run.changes += 1
        pending.extend(arrivals.get(t, ()))
        keep = []
        for job in pending:
            name = next((n for n in current if account.free(n) >= job.cpu), None)
            if name is None:
                keep.append(job)
            else:
                account.start(job, name, t)
        pending = keep
    _leftover(account, pending, grid.hours)


# --- the oracle ----------------------------------------------------------------------------------


def _prefix(values: Sequence[float]) -> list[float]:
    out = [0.0]
    for v in values:
        out.append(out[-1] + v)
    return out


def _greedy(world: World, order: Sequence[SimJob]) -> dict[int, tuple[str, int]]:
    """Each job of ``order`` at its cheapest (worker, start) that fits the quota left."""
    section, grid = world.section, world.grid
    hours = grid.hours
    sums = {w.zone: _prefix(grid.values[w.zone]) for w in section.workers}
    used = {w.name: array("i", bytes(4 * hours)) for w in section.workers}
    out: dict[int, tuple[str, int]] = {}
    for job in order:
        best: tuple[float, int, int, str] | None = None
        for rank, worker in enumerate(section.workers):
            if job.cpu > worker.cpu:
                continue
            room = worker.cpu - job.cpu
            line, prefix = used[worker.name], sums[worker.zone]
            for s in range(job.arrive, min(job.deadline, hours - job.run) + 1):
                cost = prefix[s + job.run] - prefix[s]
                if best is not None and (cost, s, rank) >= best[:3]:
                    continue
                if max(line[s : s + job.run]) <= room:
                    best = (cost, s, rank, worker.name)
        if best is None:  # nowhere within its deadline: the earliest start that fits
            best = _earliest(section, used, job, hours)
        _, start, _, name = best
        line = used[name]
        for h in range(start, min(start + job.run, hours)):
            line[h] += job.cpu
        out[job.index] = (name, start)
    return out


def _earliest(
    section: MultiKueue, used: Mapping[str, array[int]], job: SimJob, hours: int
) -> tuple[float, int, int, str]:
    for s in range(job.arrive, hours):
        for rank, worker in enumerate(section.workers):
            end = min(s + job.run, hours)
            if job.cpu <= worker.cpu and max(used[worker.name][s:end]) + job.cpu <= worker.cpu:
                return (0.0, s, rank, worker.name)
    first = section.workers[0]
    return (0.0, max(hours - job.run, job.arrive), 0, first.name)


def _oracle(world: World, run: Run) -> None:
    section, grid, jobs = world.section, world.grid, world.jobs
    by_size = sorted(jobs, key=lambda j: (-j.cpu * j.run, j.arrive, j.index))
    zone = {w.name: w.zone for w in section.workers}
    best: dict[int, tuple[str, int]] | None = None
    best_total = math.inf
    for order in (jobs, by_size):
        plan = _greedy(world, order)
        total = math.fsum(
            j.cpu * sum(grid.values[zone[plan[j.index][0]]][s : s + j.run])
            for j in jobs
            for s in (plan[j.index][1],)
        )
        if total < best_total:
            best, best_total = plan, total
    if best is None:  # no jobs
        return
    account = _Account(run, world)
    for job in jobs:
        name, start = best[job.index]
        account.start(job, name, start)


# --- the line-up ---------------------------------------------------------------------------------


def simulate_multikueue(
    scenario: Scenario,
    grid: Grid,
    only: Sequence[str] = (),
    tick: Callable[[int], None] = lambda _: None,
) -> list[Run]:
    """Runs of the baseline, the policies (all, or those in ``only``) and the oracle."""
    section = scenario.multikueue
    if section is None:
        return []
    hours, config, compare = grid.hours, scenario.policy, scenario.compare
    jobs = draw(section, hours)
    world = World(section, grid, jobs, scenario.power_kw, config.kueue)
    horizon = max(section.jobs.max_delay_hours) + max(section.jobs.run_hours)
    predicted = forecaster(grid, compare.forecast, compare.forecast_days, horizon)
    truth = perfect(grid, horizon)
    known = compare.forecast_info
    hysteresis = config.hysteresis
    rule = Hysteresis(hysteresis.margin, hysteresis.dwell_hours)
    baseline = _new_run(
        BASELINE, "carbon-agnostic Kueue: first worker in config order with quota, at once",
        Role.BASELINE, "none", hours,
    )  # fmt: skip
    _baseline(world, baseline)
    tick(1)
    runs = [baseline]
    lineup: list[tuple[str, str, str, Callable[[Run], None]]] = [
        (
            DEFAULT_MULTIKUEUE,
            "carbonshift: carbon window within max-delay, then the greenest worker with room",
            known,
            lambda r: _product(world, r, predicted, window=True),
        ),
        (
            PERFECT,
            "the same rules on the true future (a perfect forecast)",
            "perfect (future known)",
            lambda r: _product(world, r, truth, window=True),
        ),
        (
            PLACE_ONLY,
            "carbonshift's dispatcher alone: the greenest worker with room, at once",
            known,
            lambda r: _product(world, r, predicted, window=False),
        ),
        (
            ORDER,
            "Kueue's incremental dispatcher over carbonshift's MultiKueueConfig order"
            f" (margin {rule.margin:g}, dwell {rule.dwell_hours:g} h), at once",
            known,
            lambda r: _ordered(world, r, predicted, rule),
        ),
    ]
    for key, label, info, replay in lineup:
        if only and key not in only:
            continue
        run = _new_run(key, label, Role.POLICY, info, hours)
        replay(run)
        runs.append(run)
        tick(1)
    oracle = _new_run(
        ORACLE,
        "oracle: perfect knowledge, same quotas and deadlines, jobs whole; the better of"
        " two greedy passes (arrival order, largest first)",
        Role.ORACLE,
        "perfect (future and arrivals known)",
        hours,
    )
    _oracle(world, oracle)
    tick(1)
    return [*runs, oracle]
