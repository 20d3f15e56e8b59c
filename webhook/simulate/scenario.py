"""Scenario files: the fleet, the work and the settings a simulation replays.

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
    policy:                          # the product's config carbonshift's rows run under:
      hysteresis: {margin: 0.1}      # a part of a config file over the product's defaults
    compare: {top_n: 5}              # Compare fields: the compared rows' own parameters

A capacity ``share`` is a fraction of the fleet's peak concurrent replicas (the sum
over workloads), rounded down. ``policy`` is read by the product's config parser
(:func:`webhook.model.config.overlay`): the same keys, bounds and defaults as a config
file, its errors under ``policy.`` (``policy.hysteresis.margin: expected float < 1.0, got
1``).

The document is described by the structs below (unknown keys refused, limits as
``msgspec.Meta``) and converted through :func:`webhook.model.validation.convert`; rules between
keys are checked after. A bad file raises :class:`~webhook.model.validation.InvalidInput` naming
the key path (``workloads[1].replicas: expected int >= 1, got 0``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import msgspec
import yaml

from webhook.decision.forecast import DAYS, RANK_HOURS, Method
from webhook.decision.seasonal import FIT_DAYS
from webhook.kinds.reevaluation import METHODS, replayed
from webhook.model.config import Config, overlay
from webhook.model.traces import Column
from webhook.model.validation import (
    GridZone,
    InvalidInput,
    Schema,
    check,
    convert,
    keys_at,
    read_yaml,
    unknown_key_hint,
    yaml_reason,
)
from webhook.model.zones import check_zone

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


_FORECAST = replayed(METHODS[Config().reevaluate.forecast])
"""The forecast a replay runs for the product's default ``reevaluate.forecast``."""


class Compare(Schema, frozen=True):
    """Parameters of the compared rows that the product's config does not hold: the
    greedy top-N operator's, the annotations some rows set, and the forecast the
    forecast-aware rows rank and pause on."""

    top_n: Whole1 = 3
    """Clusters the greedy top-N policy keeps."""
    max_clusters: Whole1 = 3
    """``carbonshift.io/max-clusters`` of the rows that set it."""
    max_intensity: AtLeast0 = 400.0
    """``carbonshift.io/max-intensity`` of the rows that set it (gCO2eq/kWh)."""
    forecast: Method = _FORECAST
    """Forecast of the forecast-aware rows, from past hours only. Default: the product's
    default ``reevaluate.forecast`` as a replay runs it (``best`` is the day-ahead
    profile on traces that hold no provider forecast); ``persistence`` and
    ``profile-mean`` are forecasts the product does not offer, to compare against."""
    forecast_days: Whole1 = DAYS
    """Past days averaged by the day-ahead profile."""
    forecast_hours: Whole1 = RANK_HOURS
    """Spatial forecast variants rank clusters on the forecast mean over this many hours."""
    confidence: Annotated[float, msgspec.Meta(gt=0.0, lt=1.0)] = 0.8
    """The batch row that holds a job only for a start greener than now with at least this
    probability (``webhook.decision.pause.CONFIDENCE``)."""

    @property
    def forecast_info(self) -> str:
        """The intensity information the batch and MultiKueue forecast rows use, as the
        results show it."""
        days = FIT_DAYS if self.forecast is Method.SEASONAL else self.forecast_days
        return f"{self.forecast.value} forecast ({days} days)"


_MOVED: Mapping[str, str] = {
    "exponent": "policy.weighting",
    "scale": "policy.weighting",
    "margin": "policy.hysteresis",
    "dwell_hours": "policy.hysteresis",
    "low_below": "policy.nodepools",
    "high_from": "policy.nodepools",
    **dict.fromkeys(Compare.__struct_fields__, "compare"),
}
"""Keys refused directly under ``policy:`` -> where each is written: a product setting in
its config section (``margin``: ``policy: {hysteresis: {margin: ...}}``), a parameter of
the comparison under ``compare:``."""


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
    policy: Config = Config()
    """The product's config carbonshift's rows run under: the file's ``policy:`` (a part of
    a config file) over the product's defaults, read by :func:`parse`."""
    compare: Compare = Compare()
    description: str = ""

    @property
    def hours(self) -> int:
        """Number of simulated hours."""
        return int((self.end - self.start).total_seconds() // 3600)

    def zone_keys(self) -> list[tuple[str, str]]:
        """``(key path, zone)`` for every zone the scenario names, in file order."""
        out = [(f"clusters[{i}].zone", c.zone) for i, c in enumerate(self.clusters)]
        out += [(f"batch[{i}].zone", b.zone) for i, b in enumerate(self.batch)]
        if self.multikueue is not None:
            workers = enumerate(self.multikueue.workers)
            out += [(f"multikueue.workers[{i}].zone", w.zone) for i, w in workers]
        return out

    def zones(self) -> tuple[str, ...]:
        """Every grid zone the scenario needs a trace for, sorted."""
        zones = {c.zone for c in self.clusters} | {b.zone for b in self.batch}
        if self.multikueue is not None:
            zones |= {w.zone for w in self.multikueue.workers}
        return tuple(sorted(zones))


def load(path: str | Path, overrides: Mapping[str, str] | None = None) -> Scenario:
    """Read and validate a scenario file; ``overrides`` set ``policy.*`` and ``compare.*``
    keys (:func:`parse`). An error names the file, and an unknown key the valid ones."""
    data = read_yaml(path)  # its errors name the file already
    try:
        return parse(data, overrides)
    except InvalidInput as exc:
        keys = overrides.keys() if overrides else ()
        if any(exc.path == k or exc.path.startswith(f"{k}.") for k in keys):
            raise  # a --set value's, not the file's
        raise in_file(exc, path) from None


def in_file(exc: InvalidInput, path: str | Path) -> InvalidInput:
    """``exc`` at a key of the scenario file ``path``: ``FILE: KEY: message``, an unknown
    key with the closest valid one and every valid one."""
    message = exc.message
    if message == "unknown field" and (known := keys_at(Scenario, exc.path)):
        message += unknown_key_hint(exc.path.rsplit(".", 1)[-1], known)
    return InvalidInput(f"{path}: {exc.path}" if exc.path else str(path), message)


def parse(data: object, overrides: Mapping[str, str] | None = None) -> Scenario:
    """Validate an already-parsed document.

    ``overrides`` set keys of the ``policy`` and ``compare`` sections by dotted path
    (``policy.hysteresis.margin``, ``compare.top_n``), each value YAML text (``0.2``,
    ``[1, 2]``), as if the file held them. ``policy`` is validated by the product's config
    parser (:func:`webhook.model.config.overlay` over the product's defaults), its errors
    under ``policy.``."""
    doc = dict(convert(data, dict[str, Any]))
    if overrides:
        doc = _overridden(doc, overrides)
    partial = convert(doc.pop("policy", {}), dict[str, Any], "policy")
    for key, value in partial.items():
        _refuse_moved(key, f"policy.{key}", value)
    scenario = convert(doc, Scenario)
    try:
        config = overlay(Config(), partial)
    except InvalidInput as exc:
        raise exc.within("policy") from None
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
    for key, zone in scenario.zone_keys():
        check_zone(zone, key)
    for key, items in (
        ("clusters", scenario.clusters),
        ("workloads", scenario.workloads),
        ("batch", scenario.batch),
        ("multikueue.workers", scenario.multikueue.workers if scenario.multikueue else ()),
    ):
        names = [item.name for item in items]
        for i, name in enumerate(names):
            check(name not in names[:i], f"{key}[{i}].name", f"{name!r} is used twice")
    return msgspec.structs.replace(
        scenario, start=start, end=end, policy=config, description=scenario.description.strip()
    )


def _overridden(doc: Mapping[str, Any], overrides: Mapping[str, str]) -> dict[str, Any]:
    """``doc`` with each override set in its ``policy`` or ``compare`` section."""
    out = dict(doc)
    for key, text in overrides.items():
        section, _, rest = key.partition(".")
        value = _yaml(key, text)
        if section not in ("policy", "compare") or not rest:
            _refuse_moved(key, key, value)
            raise InvalidInput(key, "expected policy.KEY or compare.KEY (e.g. compare.top_n)")
        out[section] = _set(out.get(section, {}), rest.split("."), value, section)
    return out


def _yaml(key: str, text: str) -> object:
    """An override's value: YAML text, typed as the file would type it."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InvalidInput(key, f"not valid YAML: {yaml_reason(exc)}") from None


def _set(node: object, steps: Sequence[str], value: object, path: str) -> dict[str, Any]:
    """A copy of the mapping ``node`` (at ``path``) with ``value`` at ``steps`` in it."""
    out = dict(convert(node, dict[str, Any], path))
    key, *rest = steps
    out[key] = _set(out.get(key, {}), rest, value, f"{path}.{key}") if rest else value
    return out


def _refuse_moved(key: str, path: str, value: object) -> None:
    """Refuse ``key`` (at ``path``) when it is written elsewhere (:data:`_MOVED`), saying
    where: ``policy.margin: moved to policy.hysteresis.margin (write policy: {hysteresis:
    {margin: 0.2}})``."""
    where = _MOVED.get(key)
    if where is None:
        return
    head, *sections = where.split(".")
    nested: object = {key: value}
    for section in reversed(sections):
        nested = {section: nested}
    flow = yaml.safe_dump(nested, default_flow_style=True, width=1_000).strip()
    raise InvalidInput(path, f"moved to {where}.{key} (write {head}: {flow})")


def _utc(when: datetime) -> datetime:
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def hour_index(scenario: Scenario, when: datetime) -> int:
    """Hours from the scenario start to ``when``."""
    return int((when - scenario.start) / timedelta(hours=1))
