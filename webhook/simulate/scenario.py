"""Scenario files: the fleet, the work and the policy settings a simulation replays.

One YAML document (see ``scenarios/*.yaml`` for commented examples)::

    name: spatial-2023
    start: 2023-01-01T00:00:00Z      # inclusive, UTC
    end: 2024-01-01T00:00:00Z        # exclusive
    interval_hours: 1                # how often movable placements are re-evaluated
    column: lifecycle                # or direct
    power_kw: 0.1                    # energy drawn by one replica (kW)
    clusters:
      - {name: gb, zone: GB, capacity: {share: 0.2}}    # or {replicas: 40}; none = unlimited
    workloads:                       # spatial: placed on clusters by the policies
      - {name: web, replicas: 60, movable: true}        # runs from start to end
      - {name: etl, replicas: 8, movable: false, run_hours: 6, every_hours: 24}
    batch:                           # temporal: jobs waiting for a NodePool in one zone
      - {name: ci, zone: DE, length_hours: 1, slack_hours: 24, every_hours: 1, replicas: 1}
    multikueue:                      # batch across clusters: Kueue MultiKueue workers
      seed: 2023                     # the jobs are drawn from this seed (deterministic)
      workers:
        - {name: eu-de, zone: DE, cpu: 64}              # its ClusterQueue's cpu quota
      jobs: {per_day: 48, cpu: [1, 2, 4, 8], run_hours: [1, 2, 4, 8], max_delay_hours: [0, 12, 24]}
    policy: {...}                    # PolicySettings fields; all optional

A capacity ``share`` is a fraction of the fleet's peak concurrent replicas (the sum
over workloads), rounded down.

The document is described by the structs below (unknown keys refused, limits as
``msgspec.Meta``) and converted through :func:`webhook.model.validation.convert`; rules between
keys are checked after. A bad file raises :class:`~webhook.model.validation.InvalidInput` naming
the key path (``workloads[1].replicas: expected int >= 1, got 0``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import msgspec
import yaml

from webhook.decision.forecast import DAYS, RANK_HOURS, Method
from webhook.kinds.following import METHODS, replayed
from webhook.model.config import Config
from webhook.model.traces import Column
from webhook.model.validation import GridZone, Schema, check, convert, read_yaml

Name = Annotated[str, msgspec.Meta(min_length=1)]
AtLeast0 = Annotated[float, msgspec.Meta(ge=0)]
Whole0 = Annotated[int, msgspec.Meta(ge=0)]
Whole1 = Annotated[int, msgspec.Meta(ge=1)]


class Capacity(Schema, frozen=True):
    """How many replicas a cluster can hold; neither key means unlimited."""

    share: Annotated[float, msgspec.Meta(gt=0, le=1)] | None = None
    """A fraction of the fleet's peak replicas."""
    replicas: Whole1 | None = None
    """Replicas (wins over ``share``)."""


class Cluster(Schema, frozen=True):
    """A member cluster: its grid zone and how many replicas it can hold."""

    name: Name
    zone: GridZone
    capacity: Capacity = Capacity()

    @property
    def share(self) -> float | None:
        """Capacity as a fraction of the fleet's peak replicas."""
        return self.capacity.share

    @property
    def replicas(self) -> int | None:
        """Capacity in replicas (wins over ``share``); neither means unlimited."""
        return self.capacity.replicas


class Workload(Schema, frozen=True):
    """A replicated workload (one PropagationPolicy), possibly recurring."""

    name: Name
    replicas: Whole1
    movable: bool = True
    """Whether re-evaluation may move its replicas (stateless) or they stay where created."""
    run_hours: Whole1 | None = None
    """How long each instance runs; None = until the end of the scenario."""
    every_hours: Whole1 | None = None
    """A new instance arrives this often; None = a single instance."""
    offset_hours: Whole0 = 0
    """First arrival, in hours after the scenario start."""
    daily_low: Annotated[float, msgspec.Meta(gt=0, le=1)] | None = None
    """Scales up and down every day: ``replicas`` at 12:00 UTC, this fraction of them at
    00:00, along a cosine (None: a constant replica count)."""


class BatchPool(Schema, frozen=True):
    """Batch jobs served by one Karpenter NodePool in one grid zone."""

    name: Name
    zone: GridZone
    length_hours: Whole1 = 1
    """Run time of one job (not interruptible)."""
    slack_hours: Whole0 = 24
    """A job arriving at t must start by t + slack (finish by t + slack + length)."""
    every_hours: Whole1 = 1
    replicas: Whole1 = 1


class MultiKueueWorker(Schema, frozen=True):
    """A MultiKueue worker cluster: its grid zone and its ClusterQueue's cpu quota."""

    name: Name
    zone: GridZone
    cpu: Whole1
    """Nominal cpu quota of the worker's ClusterQueue."""


class JobMix(Schema, frozen=True):
    """How the MultiKueue jobs are drawn: arrivals (Poisson) and each job's size, run time
    and ``carbonshift.io/max-delay``, each picked uniformly from its list."""

    per_day: Annotated[float, msgspec.Meta(gt=0, le=100_000)] = 48.0
    """Mean arrivals per day (a Poisson number each hour)."""
    cpu: Annotated[tuple[Whole1, ...], msgspec.Meta(min_length=1)] = (1, 2, 4, 8)
    """Requested cpu (the whole job: Kueue's usage summed over its pod sets)."""
    run_hours: Annotated[tuple[Whole1, ...], msgspec.Meta(min_length=1)] = (1, 2, 4, 8)
    """Run time (known: ``carbonshift.io/expected-runtime``); not interruptible."""
    max_delay_hours: Annotated[
        tuple[Annotated[int, msgspec.Meta(ge=0, le=168)], ...], msgspec.Meta(min_length=1)
    ] = (0, 12, 24)
    """``carbonshift.io/max-delay`` in hours; 0: none (the job starts when it can)."""


class MultiKueue(Schema, frozen=True):
    """Batch across clusters: Jobs a Kueue MultiKueue manager dispatches to workers."""

    workers: Annotated[tuple[MultiKueueWorker, ...], msgspec.Meta(min_length=1)]
    """In ``MultiKueueConfig.spec.clusters`` order (what carbon-agnostic Kueue follows)."""
    jobs: JobMix = JobMix()
    seed: int = 0
    """Seed of the job draw: the same seed, the same jobs."""


_PRODUCT = Config()
"""The product's defaults: the settings below default to them."""
_H, _W, _N = _PRODUCT.hysteresis, _PRODUCT.weighting, _PRODUCT.nodepools
_METHOD = replayed(METHODS[_PRODUCT.reevaluate.forecast])


class PolicySettings(Schema, frozen=True):
    """Parameters of the compared policies.

    The ones the product's config holds default to its defaults (:class:`Config`, read
    here, never copied) and take its bounds; :meth:`config` is the config carbonshift's
    rows run under.
    """

    exponent: Annotated[float, msgspec.Meta(ge=0, le=8)] = _W.exponent
    """``weighting.exponent`` for carbon weights."""
    scale: Annotated[int, msgspec.Meta(ge=1, le=10_000)] = _W.scale
    """``weighting.scale``."""
    top_n: Whole1 = 3
    """Clusters the greedy top-N policy keeps."""
    max_clusters: Whole1 = 3
    """``carbonshift.io/max-clusters`` of the rows that set it."""
    max_intensity: AtLeast0 = 400.0
    """``carbonshift.io/max-intensity`` of the rows that set it (gCO2eq/kWh)."""
    margin: Annotated[float, msgspec.Meta(ge=0, lt=1)] = _H.margin
    """``hysteresis.margin`` (relative improvement needed to switch)."""
    dwell_hours: AtLeast0 = _H.dwell_hours
    """``hysteresis.dwell_hours``."""
    forecast: Method = _METHOD
    """Forecast used by the forecast-aware variants (``reevaluate.forecast`` as a replay
    runs it: ``best`` is the day-ahead profile, the traces holding no provider forecast)."""
    forecast_days: Whole1 = DAYS
    """Past days averaged by the day-ahead profile."""
    forecast_hours: Whole1 = RANK_HOURS
    """Spatial forecast variants rank clusters on the forecast mean over this many hours."""
    low_below: AtLeast0 = _N.low_below
    """NodePool class thresholds (``nodepools.low_below`` / ``high_from``)."""
    high_from: AtLeast0 = _N.high_from

    def config(self, base: Config | None = None) -> Config:
        """``base`` (default: the product's defaults) with these settings over it."""
        base = base or Config()
        return msgspec.structs.replace(
            base,
            weighting=msgspec.structs.replace(
                base.weighting, exponent=self.exponent, scale=self.scale
            ),
            hysteresis=msgspec.structs.replace(
                base.hysteresis, margin=self.margin, dwell_hours=self.dwell_hours
            ),
            nodepools=msgspec.structs.replace(
                base.nodepools, low_below=self.low_below, high_from=self.high_from
            ),
        )


class Scenario(Schema, frozen=True, kw_only=True):
    """A whole scenario file, validated."""

    name: str = "scenario"
    start: datetime
    """Inclusive, UTC, on the hour."""
    end: datetime
    """Exclusive, UTC, on the hour."""
    interval_hours: Whole1 = 1
    column: Column = Column.LIFECYCLE
    power_kw: AtLeast0 = 0.1
    clusters: tuple[Cluster, ...] = ()
    workloads: tuple[Workload, ...] = ()
    batch: tuple[BatchPool, ...] = ()
    multikueue: MultiKueue | None = None
    policy: PolicySettings = PolicySettings()
    description: str = ""

    @property
    def hours(self) -> int:
        """Number of simulated hours."""
        return int((self.end - self.start).total_seconds() // 3600)

    def zones(self) -> tuple[str, ...]:
        """Every grid zone the scenario needs a trace for, sorted."""
        zones = {c.zone for c in self.clusters} | {b.zone for b in self.batch}
        if self.multikueue is not None:
            zones |= {w.zone for w in self.multikueue.workers}
        return tuple(sorted(zones))


def load(path: str | Path, overrides: Mapping[str, str] | None = None) -> Scenario:
    """Read and validate a scenario file; ``overrides`` set ``policy.*`` keys (as text)."""
    return parse(read_yaml(path), overrides)


def parse(data: object, overrides: Mapping[str, str] | None = None) -> Scenario:
    """Validate an already-parsed document; ``overrides`` set ``policy.*`` keys (as text)."""
    doc = convert(data, dict[str, Any])
    if overrides:
        policy = dict(convert(doc.get("policy", {}), dict[str, Any], "policy"))
        for key, value in overrides.items():
            policy[key.removeprefix("policy.")] = yaml.safe_load(value)
        doc = {**doc, "policy": policy}
    scenario = convert(doc, Scenario)
    start, end = _utc(scenario.start), _utc(scenario.end)
    for key, when in (("start", start), ("end", end)):
        on_hour = when.replace(minute=0, second=0, microsecond=0)
        check(when == on_hour, key, f"must be on the hour, got {when.isoformat()}")
    check(end > start, "end", f"must be after start ({start.isoformat()})")
    check(
        bool(scenario.clusters) or not scenario.workloads,
        "clusters",
        "workloads need at least one cluster",
    )
    check(
        bool(scenario.workloads or scenario.batch or scenario.multikueue),
        "workloads",
        "a scenario needs workloads, batch pools, multikueue or several",
    )
    for key, items in (
        ("clusters", scenario.clusters),
        ("workloads", scenario.workloads),
        ("batch", scenario.batch),
        ("multikueue.workers", scenario.multikueue.workers if scenario.multikueue else ()),
    ):
        names = [item.name for item in items]
        for i, name in enumerate(names):
            check(name not in names[:i], f"{key}[{i}].name", f"{name!r} is used twice")
    low, high = scenario.policy.low_below, scenario.policy.high_from
    check(high >= low, "policy.high_from", f"must be >= low_below ({low:g}), got {high:g}")
    return msgspec.structs.replace(
        scenario, start=start, end=end, description=scenario.description.strip()
    )


def _utc(when: datetime) -> datetime:
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def hour_index(scenario: Scenario, when: datetime) -> int:
    """Hours from the scenario start to ``when``."""
    return int((when - scenario.start) / timedelta(hours=1))
