"""Carbon-aware batch across clusters for Kueue MultiKueue: where and when a Job runs.

A MultiKueue manager cluster reserves quota for a Job's Workload, then dispatches it to
one of several worker clusters; each worker admits it when its own ClusterQueue has
quota. carbonshift takes part twice, with the same ranking both times:

1. **When** (the admission check ``carbonshift.io/carbon-window``, :func:`window`): a
   Workload whose Job allows a delay (``carbonshift.io/max-delay``, else the configured
   default) is held Pending while a greener start is forecast within the delay it has
   left, and is Ready at that start, at the latest at its deadline (``created +
   max-delay``, the latest start), whatever the grid. Never beyond the deadline.
2. **Where** (the external dispatcher ``carbonshift.io/carbon-dispatcher``,
   :func:`nominate`): ``status.nominatedClusterNames`` gets the greenest worker that has
   room by our count (its ClusterQueue's nominal quota less what it has reserved and
   less the jobs already nominated to it and not yet admitted there), and each round in
   which no nominated worker admitted the job adds the next workers in carbon order, as
   Kueue's incremental dispatcher does in config order. When no worker has room by our
   count every worker that can run the job is nominated, greenest first: a job is never
   held for carbonshift's sake; Kueue admits it wherever quota frees first. Users who keep
   Kueue's own incremental dispatcher get :func:`order` instead: the carbon order of
   ``MultiKueueConfig.spec.clusters``, damped by the hysteresis rule
   (:mod:`webhook.decision.hysteresis`).

**Which grid the window is judged on.** Since Kueue v0.17, MultiKueue dispatches a
Workload only after every other admission check is Ready, so the window is decided before
any worker is nominated. It is judged on the grid of the worker the dispatcher will
nominate first: the greenest worker that has room now (:func:`window_zone`, which is
:func:`nominate` at round 0). One ranking decides both: the job waits for the green hour
of the grid it is about to run on, then goes there first.
:func:`admission` is that check whole: :func:`window` on :func:`window_zone`'s worker,
and Ready at once when that worker would keep less than half its quota free after the
job (:data:`SPARE`): a busy worker's green slot goes to the next job while this one
waits, and the wait saves nothing for the fleet.

Every worker is ranked on the mean forecast intensity of its grid zone over the job's run
time (``ceil(runtime)`` hours from now, :func:`zone_means` through
:func:`webhook.decision.forecast.ranking_value`); the controller and the simulator call
the same helpers. Pure: the Workload, the ClusterQueues, the forecasts and ``now`` come in
as data; no I/O, no clock.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from webhook.decision.forecast import best_start, ranking_value
from webhook.decision.hysteresis import Hysteresis, should_switch
from webhook.decision.pause import duration, waits
from webhook.decision.quantity import quantity
from webhook.decision.ranking import order_greenest
from webhook.model import vocabulary
from webhook.model.objects import condition, dig, items, mapping, meta_of, strings, text
from webhook.model.validation import InvalidInput

HOUR = timedelta(hours=1)
MAX_NOMINATED = 20
"""Kueue's limit on ``status.nominatedClusterNames``."""
ZERO = Decimal(0)

Outlooks = Mapping[str, Sequence[float] | None]
"""Grid zone -> hourly forecast ``[now, now+1 h, ...]`` (None: no forecast)."""
Readings = Mapping[str, float | None]
"""Grid zone -> current intensity, for zones without a forecast."""


# --- the job ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Job:
    """A Workload on the MultiKueue manager, as the rules read it."""

    namespace: str
    name: str
    """The Workload's name."""
    requests: Mapping[str, Decimal]
    """Total requests over the pod sets (Kueue's admission usage once quota is reserved)."""
    runtime: timedelta
    """How long it runs: ``spec.maximumExecutionTimeSeconds``, else the Job's
    ``carbonshift.io/expected-runtime``, else the configured default."""
    created: datetime
    """The Workload's creationTimestamp."""
    max_delay: timedelta | None = None
    """The Job's ``carbonshift.io/max-delay``, else the configured default; None: no wait."""
    nominated: tuple[str, ...] = ()
    """``status.nominatedClusterNames``."""
    cluster: str | None = None
    """``status.clusterName``: the worker that admitted it."""
    quota_reserved: bool = False
    """Condition ``QuotaReserved`` is True on the manager."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def hours(self) -> int:
        """The run time in whole hours (at least 1): what rankings and windows average over."""
        return hours_of(self.runtime)

    @property
    def deadline(self) -> datetime | None:
        """The latest start: ``created + max_delay`` (None: no delay allowed for)."""
        return None if self.max_delay is None else self.created + self.max_delay

    @property
    def in_flight(self) -> bool:
        """Nominated to workers and admitted by none yet."""
        return bool(self.nominated) and self.cluster is None


def hours_of(runtime: timedelta) -> int:
    """``ceil(runtime)`` in hours, at least 1."""
    return max(1, math.ceil(runtime / HOUR))


def _add(total: dict[str, Decimal], name: object, raw: object, times: Decimal = Decimal(1)) -> None:
    amount = quantity(raw)
    if isinstance(name, str) and name and amount is not None:
        total[name] = total.get(name, ZERO) + amount * times


def _pod_requests(pod_spec: object) -> dict[str, Decimal]:
    """A pod's effective requests: the containers' sum, or the largest init container's
    request when that is larger (as the scheduler and Kueue count them)."""
    total: dict[str, Decimal] = {}
    for container in items(pod_spec, "containers"):
        for name, raw in mapping(container, "resources", "requests").items():
            _add(total, name, raw)
    for container in items(pod_spec, "initContainers"):
        for name, raw in mapping(container, "resources", "requests").items():
            amount = quantity(raw)
            if amount is not None and amount > total.get(name, ZERO):
                total[name] = amount
    return total


def requests_of(workload: Mapping[str, Any]) -> dict[str, Decimal]:
    """Total requests of a Workload: ``status.admission.podSetAssignments[].resourceUsage``
    when Kueue filled it (quota reserved), else each pod set's ``count`` times its
    template's requests."""
    total: dict[str, Decimal] = {}
    assignments = items(workload, "status", "admission", "podSetAssignments")
    usage = [mapping(a, "resourceUsage") for a in assignments]
    if any(usage):
        for used in usage:
            for name, raw in used.items():
                _add(total, name, raw)
        return total
    for pod_set in items(workload, "spec", "podSets"):
        count = dig(pod_set, "count")
        times = Decimal(count) if isinstance(count, int) and not isinstance(count, bool) else 1
        for name, amount in _pod_requests(dig(pod_set, "template", "spec")).items():
            total[name] = total.get(name, ZERO) + amount * times
    return total


def job_of(
    workload: Mapping[str, Any],
    job_annotations: Mapping[str, str] | None,
    *,
    default_runtime: timedelta,
    default_max_delay: timedelta | None,
) -> Job:
    """Read a manager Workload and its Job's annotations.

    Raises :class:`InvalidInput` naming the annotation for a malformed
    ``carbonshift.io/expected-runtime`` or ``carbonshift.io/max-delay``, and
    ``metadata.creationTimestamp`` when the Workload has none."""
    meta = meta_of(workload)
    annotations = strings(job_annotations)
    created = meta.creation_timestamp
    if created is None:
        raise InvalidInput("metadata.creationTimestamp", "must be an RFC 3339 time")
    seconds = dig(workload, "spec", "maximumExecutionTimeSeconds")
    raw_runtime = annotations.get(vocabulary.EXPECTED_RUNTIME)
    if isinstance(seconds, int) and not isinstance(seconds, bool) and seconds > 0:
        runtime = timedelta(seconds=seconds)
        if raw_runtime is not None:
            vocabulary.expected_runtime(raw_runtime)  # still refused when malformed
    elif raw_runtime is not None:
        runtime = vocabulary.expected_runtime(raw_runtime)
    else:
        runtime = default_runtime
    raw_delay = annotations.get(vocabulary.MAX_DELAY)
    max_delay = default_max_delay if raw_delay is None else vocabulary.max_delay(raw_delay)
    cluster = text(workload, "status", "clusterName")
    nominated = tuple(
        n for n in items(workload, "status", "nominatedClusterNames") if isinstance(n, str) and n
    )
    return Job(
        namespace=meta.namespace,
        name=meta.name,
        requests=requests_of(workload),
        runtime=runtime,
        created=created,
        max_delay=max_delay,
        nominated=nominated,
        cluster=cluster or None,
        quota_reserved=condition(workload, "QuotaReserved") == "True",
    )


# --- the workers -----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Worker:
    """A MultiKueue worker cluster: its grid zone and its ClusterQueue's quota and use."""

    name: str
    zone: str | None
    quota: Mapping[str, Decimal]
    """Nominal quota per resource, summed over the flavors (borrowing not counted)."""
    used: Mapping[str, Decimal] = dataclasses.field(default_factory=dict)
    """Quota reserved per resource (``status.flavorsReservation``, else ``flavorsUsage``)."""


def _totals(entries: Iterable[Any], amount_key: str) -> dict[str, Decimal]:
    total: dict[str, Decimal] = {}
    for flavor in entries:
        for resource in items(flavor, "resources"):
            _add(total, dig(resource, "name"), dig(resource, amount_key))
    return total


def worker_of(name: str, zone: str | None, cluster_queue: Mapping[str, Any]) -> Worker:
    """A worker from its ClusterQueue (as read on the worker cluster)."""
    flavors = [
        f
        for group in items(cluster_queue, "spec", "resourceGroups")
        for f in items(group, "flavors")
    ]
    reserved = items(cluster_queue, "status", "flavorsReservation")
    if not reserved:
        reserved = items(cluster_queue, "status", "flavorsUsage")
    return Worker(
        name=name,
        zone=zone,
        quota=_totals(flavors, "nominalQuota"),
        used=_totals(reserved, "total"),
    )


def room(worker: Worker, in_flight: Iterable[Job]) -> dict[str, Decimal]:
    """What ``worker`` can still take by our count: its quota less what it has reserved
    and less the requests of jobs nominated to it and admitted nowhere yet; never below 0."""
    left = {r: q - worker.used.get(r, ZERO) for r, q in worker.quota.items()}
    for job in in_flight:
        if job.cluster is None and worker.name in job.nominated:
            for r, amount in job.requests.items():
                if r in left:
                    left[r] -= amount
    return {r: max(v, ZERO) for r, v in left.items()}


def fits(job: Job, room: Mapping[str, Decimal]) -> bool:
    """Whether every resource the job requests fits ``room``."""
    return all(amount <= room.get(r, ZERO) for r, amount in job.requests.items() if amount > 0)


def excluded(job: Job, worker: Worker, allowed: Collection[str] | None = None) -> str | None:
    """Why ``worker`` can never run ``job`` (None: it can, given room)."""
    if allowed is not None and worker.name not in allowed:
        return "not among the job's workers"
    for resource, amount in sorted(job.requests.items()):
        if amount <= 0:
            continue
        quota = worker.quota.get(resource)
        if quota is None or quota <= 0:
            return f"no quota for {resource}"
        if amount > quota:
            return f"needs {amount} {resource}, its whole quota is {quota}"
    return None


def _others(job: Job, in_flight: Iterable[Job]) -> list[Job]:
    return [j for j in in_flight if (j.namespace, j.name) != (job.namespace, job.name)]


# --- ranking ---------------------------------------------------------------------------


def zone_mean(
    series: Sequence[float] | None, hours: int, reading: float | None = None
) -> float | None:
    """What a zone ranks on for a run of ``hours``: the mean of its forecast over the first
    ``hours`` hours (:func:`~webhook.decision.forecast.ranking_value`), else its current
    reading, else None (ranks last)."""
    if series:
        return ranking_value(series[: max(hours, 1)])
    return reading


def zone_means(
    zones: Iterable[str | None], outlooks: Outlooks, hours: int, readings: Readings | None = None
) -> dict[str, float | None]:
    """:func:`zone_mean` of each zone (a zone of None is left out)."""
    current: Readings = {} if readings is None else readings
    return {z: zone_mean(outlooks.get(z), hours, current.get(z)) for z in zones if z is not None}


def worker_means(
    workers: Iterable[Worker], outlooks: Outlooks, hours: int, readings: Readings | None = None
) -> dict[str, float | None]:
    """Worker name -> its zone's :func:`zone_mean` (None: no zone or no data)."""
    listed = list(workers)
    means = zone_means((w.zone for w in listed), outlooks, hours, readings)
    return {w.name: None if w.zone is None else means[w.zone] for w in listed}


def rank(
    workers: Iterable[Worker],
    outlooks: Outlooks,
    *,
    hours: int = 1,
    readings: Readings | None = None,
) -> list[str]:
    """Worker names greenest first on :func:`worker_means` over ``hours``; a worker without
    data ranks last; ties by name."""
    return order_greenest(worker_means(workers, outlooks, hours, readings))


def _g(value: float | None) -> str:
    return "no data" if value is None else f"{value:.0f} g/kWh"


# --- where: the dispatcher ---------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Nomination:
    """What the external dispatcher writes, and why."""

    names: tuple[str, ...]
    """``status.nominatedClusterNames`` (at most :data:`MAX_NOMINATED`)."""
    ranked: tuple[str, ...]
    """Every worker that can run the job, greenest first."""
    reason: str
    """One line for an Event."""
    round: int = 0
    means: Mapping[str, float | None] = dataclasses.field(default_factory=dict)
    """Worker -> the mean intensity it was ranked on."""
    full: tuple[str, ...] = ()
    """Workers without room by our count."""
    excluded: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Worker -> why it can never run the job."""


def nominate(
    job: Job,
    workers: Sequence[Worker],
    outlooks: Outlooks,
    in_flight: Iterable[Job],
    *,
    rounds: int,
    step: int = 1,
    allowed: Collection[str] | None = None,
    readings: Readings | None = None,
) -> Nomination:
    """The workers to nominate for ``job`` after ``rounds`` elapsed rounds.

    The first ``step`` greenest workers with room, then ``step`` more per elapsed round in
    carbon order (those with room first, then the full ones); with no room anywhere, every
    worker that can run the job, greenest first. Never an :func:`excluded` worker."""
    others = _others(job, in_flight)
    why_not = {w.name: why for w in workers if (why := excluded(job, w, allowed)) is not None}
    eligible = [w for w in workers if w.name not in why_not]
    hours = job.hours
    means = worker_means(eligible, outlooks, hours, readings)
    ranked = order_greenest(means)
    by_name = {w.name: w for w in eligible}
    free = [n for n in ranked if fits(job, room(by_name[n], others))]
    full = tuple(n for n in ranked if n not in free)
    rounds = max(rounds, 0)
    if free:
        sequence = free + list(full)
        names = tuple(sequence[: min(max(step, 1) * (rounds + 1), MAX_NOMINATED)])
    else:
        names = tuple(ranked[:MAX_NOMINATED])
    reason = _nomination_reason(names, ranked, means, full, why_not, hours=hours, free=bool(free))
    return Nomination(names, tuple(ranked), reason, rounds, means, full, why_not)


def _nomination_reason(
    names: Sequence[str],
    ranked: Sequence[str],
    means: Mapping[str, float | None],
    full: Sequence[str],
    why_not: Mapping[str, str],
    *,
    hours: int,
    free: bool,
) -> str:
    notes = [f"{n} excluded ({why})" for n, why in sorted(why_not.items())]
    if not names:
        return "no worker can run it: " + "; ".join(notes) if notes else "no worker"
    first = names[0]
    run = f"over the {hours}h run"
    if not free:
        head = f"no worker has room: all {len(names)} nominated greenest first, {first} "
        head += f"{_g(means[first])} {run}"
    else:
        rivals = [n for n in ranked if n != first]
        head = f"{first} first: {_g(means[first])} {run}"
        if rivals:
            head += f" vs {_g(means[rivals[0]])} on {rivals[0]}"
        greener_full = [n for n in full if ranked.index(n) < ranked.index(first)]
        notes[:0] = [f"{n} full" for n in greener_full]
        if len(names) > 1:
            notes.insert(0, f"also {', '.join(names[1:])}")
    return "; ".join([head, *notes])


def window_zone(
    job: Job,
    workers: Sequence[Worker],
    outlooks: Outlooks,
    in_flight: Iterable[Job],
    *,
    allowed: Collection[str] | None = None,
    readings: Readings | None = None,
) -> tuple[str, str | None] | None:
    """``(worker, zone)`` the carbon window is judged on: the worker :func:`nominate` puts
    first at round 0 (the greenest with room now); None when no worker can run the job."""
    nomination = nominate(
        job, workers, outlooks, in_flight, rounds=0, allowed=allowed, readings=readings
    )
    if not nomination.names:
        return None
    first = nomination.names[0]
    zone = next(w.zone for w in workers if w.name == first)
    return first, zone


# --- where, when carbon does not decide ------------------------------------------------------


def all_at_once(clusters: Iterable[str], active: Collection[str]) -> tuple[str, ...]:
    """What Kueue's own all-at-once dispatcher (its default) nominates: every cluster of the
    Workload's MultiKueueConfig that Kueue reaches (``active``: the MultiKueueClusters whose
    ``Active`` condition is True), by name, at most :data:`MAX_NOMINATED`. The external
    dispatcher nominates this for a Workload carbon does not place (not opted in, opted
    out, a malformed annotation, no worker readable), so no Job waits for carbonshift."""
    return tuple(sorted({c for c in clusters if c in active}))[:MAX_NOMINATED]


def _transition(entry: object) -> datetime | None:
    raw = text(entry, "lastTransitionTime")
    try:
        return vocabulary.parse_time(raw) if raw else None
    except ValueError:
        return None


def waiting_since(workload: Mapping[str, Any], multikueue_check: str | None) -> datetime | None:
    """Since when ``workload`` waits for a worker nomination, or None when it does not.

    It waits when MultiKueue dispatches it (``multikueue_check``: the name of the MultiKueue
    AdmissionCheck on its ClusterQueue; None: not MultiKueue's), it has quota reserved on the
    manager, is neither finished, being deleted nor evicted, has no ``status.clusterName``
    and no ``status.nominatedClusterNames``, and every admission check but MultiKueue's is
    Ready (a check that holds it, such as the carbon window, is not a missing nomination).
    Since: the latest ``lastTransitionTime`` of those conditions (quota reserved, each
    other check Ready), else the Workload's creation."""
    if multikueue_check is None or condition(workload, "QuotaReserved") != "True":
        return None
    if condition(workload, "Finished") == "True" or condition(workload, "Evicted") == "True":
        return None
    meta = meta_of(workload)
    if meta.deletion_timestamp or text(workload, "status", "clusterName"):
        return None
    if items(workload, "status", "nominatedClusterNames"):
        return None
    times = [
        _transition(c)
        for c in items(workload, "status", "conditions")
        if text(c, "type") == "QuotaReserved"
    ]
    for check in items(workload, "status", "admissionChecks"):
        if text(check, "name") == multikueue_check:
            continue
        if text(check, "state") != "Ready":
            return None
        times.append(_transition(check))
    known = [t for t in times if t is not None]
    return max(known) if known else meta.creation_timestamp


# --- where, with Kueue's own incremental dispatcher ----------------------------------------


def order(
    current: Sequence[str],
    workers: Sequence[Worker],
    outlooks: Outlooks,
    held: float,
    hysteresis: Hysteresis,
    *,
    hours: int = 1,
    readings: Readings | None = None,
) -> tuple[list[str] | None, str]:
    """The carbon order for ``MultiKueueConfig.spec.clusters``, or None when ``current``
    stays, and a reason line.

    ``held``: hours the current order has been in force. ``hours``: the representative run
    time the ranking averages over. The order switches when the workers changed, or when
    the new first worker is greener than the current first by more than the margin and
    the current order has dwelt ``dwell_hours``
    (:func:`webhook.decision.hysteresis.should_switch`)."""
    means = worker_means(workers, outlooks, hours, readings)
    proposed = order_greenest(means)
    head = f"{proposed[0]} first: {_g(means[proposed[0]])} over {hours}h" if proposed else ""
    if sorted(current) != sorted(proposed) or len(set(current)) != len(current):
        return proposed, f"the workers changed; {head}" if head else "no workers"
    if list(current) == proposed:
        return None, f"the order in force is the carbon order ({head})"
    was, new = current[0], proposed[0]
    if was == new:
        return None, f"{was} stays first ({_g(means[was])} over {hours}h)"
    versus = f"{new} {_g(means[new])} vs {was} {_g(means[was])} over {hours}h"
    if held < hysteresis.dwell_hours:
        dwell = f"{hysteresis.dwell_hours:g}h"
        return None, f"held: the order has been in force {held:.1f}h of {dwell}; {versus}"
    if should_switch(hysteresis, held_cost=means[was], proposed_cost=means[new], held_hours=held):
        return proposed, f"{versus}: greener by more than {hysteresis.margin:.0%}"
    return None, f"held: {versus}, not greener by more than {hysteresis.margin:.0%}"


# --- when: the admission check --------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Window:
    """The carbon admission check's state for one Workload."""

    ready: bool
    until: datetime | None
    """Pending: when it is expected to become Ready (never past the deadline)."""
    reason: str


def _hour(at: datetime) -> datetime:
    return at.replace(minute=0, second=0, microsecond=0)


def window(
    job: Job, series: Sequence[float] | None, now: datetime, *, margin: float = 0.0
) -> Window:
    """Whether ``job`` may start now, on ``series`` (the hourly forecast ``[now, now+1 h,
    ...]`` of the grid it is about to run on, :func:`window_zone`).

    Ready without ``max_delay``, at or past the deadline, without a forecast, or when no
    start within the delay left is greener (:func:`webhook.decision.pause.waits`). Else
    Pending until the best start (:func:`webhook.decision.forecast.best_start`), capped at
    the deadline."""
    deadline = job.deadline
    if deadline is None:
        return Window(True, None, "no max-delay: starts at once")
    if now >= deadline:
        return Window(True, None, f"deadline {vocabulary.format_time(deadline)} reached")
    if not series:
        return Window(True, None, "no forecast: starts at once")
    start_of_hour = _hour(now)
    slack = (deadline - start_of_hour) // HOUR
    length = job.hours
    left = duration(deadline - now) if deadline - now >= timedelta(minutes=1) else "<1m"
    if not waits(series, length, slack):
        return Window(True, None, f"no greener {length}h run forecast within the {left} left")
    ahead = best_start(series, length, slack)
    until = min(start_of_hour + ahead * HOUR, deadline)
    now_mean = ranking_value(series[:length])
    later = ranking_value(series[ahead : ahead + length])
    if later >= now_mean * (1.0 - margin):
        return Window(
            True,
            None,
            f"the greenest {length}h run within the {left} left ({_g(later)}) is not"
            f" {margin:.0%} greener than now ({_g(now_mean)})",
        )
    reason = (
        f"waiting for a greener {length}h run: {_g(later)} from "
        f"{vocabulary.format_time(until)} vs {_g(now_mean)} now; "
        f"deadline {vocabulary.format_time(deadline)}"
    )
    return Window(False, until, reason)


SPARE = 0.5
"""The window holds a job only on a worker that keeps at least this share of its quota
free after it, for every resource the job requests. On a busier worker the green slot is
scarce: a held job gives it to the next one and later lands on a dirtier worker, so
waiting there saves nothing for the fleet (on ``scenarios/batch-multikueue-2023.yaml``,
the first four weeks: 88.8 % of the oracle's saving without this guard, 93.6 % at 0.25,
94.6 % at 0.5)."""


def _spare(job: Job, worker: Worker, left: Mapping[str, Decimal], spare: float) -> bool:
    share = Decimal(str(spare))
    return all(
        left.get(r, ZERO) - amount >= share * worker.quota.get(r, ZERO)
        for r, amount in job.requests.items()
        if amount > 0
    )


def admission(
    job: Job,
    workers: Sequence[Worker],
    outlooks: Outlooks,
    in_flight: Iterable[Job],
    now: datetime,
    *,
    allowed: Collection[str] | None = None,
    readings: Readings | None = None,
    spare: float = SPARE,
    margin: float = 0.0,
) -> tuple[Window, str | None]:
    """The carbon admission check of ``job`` and the worker it was judged on: the
    :func:`window` on the forecast of :func:`window_zone`'s worker, Ready at once when
    that worker would keep less than ``spare`` of its quota free after the job
    (:data:`SPARE`)."""
    flying = list(in_flight)
    where = window_zone(job, workers, outlooks, flying, allowed=allowed, readings=readings)
    if where is None:
        return window(job, None, now, margin=margin), None
    name, zone = where
    worker = next(w for w in workers if w.name == name)
    left = room(worker, _others(job, flying))
    if job.deadline is not None and now < job.deadline and not _spare(job, worker, left, spare):
        return Window(True, None, f"{name} is busy: waiting would give its room away"), name
    series = outlooks.get(zone) if zone is not None else None
    return window(job, series, now, margin=margin), name


# --- the record ------------------------------------------------------------------------------


def record(
    nomination: Nomination | None = None,
    checked: Window | None = None,
    *,
    zones: Mapping[str, str | None] | None = None,
) -> dict[str, Any]:
    """The ``carbonshift.io/decision`` annotation of a Workload: small and JSON-able.

    ``zones``: worker -> grid zone, to state the means per zone (``means``) rather than per
    worker."""
    out: dict[str, Any] = {}
    zone_of: Mapping[str, str | None] = {} if zones is None else zones
    if nomination is not None:
        means: dict[str, int | None] = {}
        for name in nomination.ranked:
            value = nomination.means.get(name)
            key = zone_of.get(name) or name
            means[key] = None if value is None else round(value)
        out.update(
            ranked=list(nomination.ranked),
            nominated=list(nomination.names),
            round=nomination.round,
            reason=nomination.reason,
            means=means,
        )
    if checked is not None:
        out["window"] = {
            "ready": checked.ready,
            "reason": checked.reason,
            **({"until": vocabulary.format_time(checked.until)} if checked.until else {}),
        }
    return out
