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
    policy: {...}                    # PolicySettings fields; all optional

A capacity ``share`` is a fraction of the fleet's peak concurrent replicas (the sum
over workloads), rounded down.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from webhook.decision.forecast import Method
from webhook.traces import Column


class ScenarioError(ValueError):
    """The scenario file is invalid; the message names the offending key."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"scenario key '{key}': {message}")
        self.key = key


@dataclasses.dataclass(frozen=True, slots=True)
class Cluster:
    """A member cluster: its grid zone and how many replicas it can hold."""

    name: str
    zone: str
    share: float | None = None
    """Capacity as a fraction of the fleet's peak replicas."""
    replicas: int | None = None
    """Capacity in replicas (wins over ``share``); neither means unlimited."""


@dataclasses.dataclass(frozen=True, slots=True)
class Workload:
    """A replicated workload (one PropagationPolicy), possibly recurring."""

    name: str
    replicas: int
    movable: bool = True
    """Whether re-evaluation may move its replicas (stateless) or they stay where created."""
    run_hours: int | None = None
    """How long each instance runs; None = until the end of the scenario."""
    every_hours: int | None = None
    """A new instance arrives this often; None = a single instance."""
    offset_hours: int = 0
    """First arrival, in hours after the scenario start."""


@dataclasses.dataclass(frozen=True, slots=True)
class BatchPool:
    """Batch jobs served by one Karpenter NodePool in one grid zone."""

    name: str
    zone: str
    length_hours: int
    """Run time of one job (not interruptible)."""
    slack_hours: int
    """A job arriving at t must start by t + slack (finish by t + slack + length)."""
    every_hours: int = 1
    replicas: int = 1


@dataclasses.dataclass(frozen=True, slots=True)
class PolicySettings:
    """Parameters of the compared policies (defaults are carbonshift's defaults)."""

    exponent: float = 1.0
    """``weighting.exponent`` for carbon weights."""
    scale: int = 100
    """``weighting.scale``."""
    top_n: int = 3
    """Clusters the greedy top-N policy keeps."""
    max_clusters: int = 3
    """Clusters in the first green-first affinity term; each fallback term adds one."""
    max_intensity: float = 400.0
    """Limit of the max-intensity filter (gCO2eq/kWh)."""
    margin: float = 0.1
    """Hysteresis margin (relative improvement needed to switch)."""
    dwell_hours: float = 12.0
    """Minimum dwell of a placement."""
    forecast: Method = Method.PROFILE
    """Forecast used by the forecast-aware variants."""
    forecast_days: int = 7
    """Past days averaged by the day-ahead profile."""
    forecast_hours: int = 24
    """Spatial forecast variants rank clusters on the forecast mean over this many hours."""
    low_below: float = 150.0
    """NodePool class thresholds (``nodepools.low_below`` / ``high_from``)."""
    high_from: float = 400.0


@dataclasses.dataclass(frozen=True, slots=True)
class Scenario:
    """A whole scenario file, validated."""

    name: str
    start: datetime
    end: datetime
    interval_hours: int = 1
    column: Column = Column.LIFECYCLE
    power_kw: float = 0.1
    clusters: tuple[Cluster, ...] = ()
    workloads: tuple[Workload, ...] = ()
    batch: tuple[BatchPool, ...] = ()
    policy: PolicySettings = PolicySettings()
    description: str = ""

    @property
    def hours(self) -> int:
        """Number of simulated hours."""
        return int((self.end - self.start).total_seconds() // 3600)

    def zones(self) -> tuple[str, ...]:
        """Every grid zone the scenario needs a trace for, sorted."""
        return tuple(sorted({c.zone for c in self.clusters} | {b.zone for b in self.batch}))


_TOP = (
    "name", "description", "start", "end", "interval_hours", "column", "power_kw",
    "clusters", "workloads", "batch", "policy",
)  # fmt: skip


def load(path: str | Path, overrides: Mapping[str, str] | None = None) -> Scenario:
    """Read and validate a scenario file; ``overrides`` set ``policy.*`` keys (as text)."""
    try:
        text = Path(path).read_text("utf-8")
    except OSError as exc:
        raise ScenarioError("<file>", f"cannot read {path}: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ScenarioError("<file>", f"not valid YAML{where}") from None
    return parse(data if data is not None else {}, overrides)


def parse(data: object, overrides: Mapping[str, str] | None = None) -> Scenario:
    """Validate an already-parsed document."""
    top = _mapping(data, "<root>")
    _only(top, "", _TOP)
    start = _time(top.get("start"), "start")
    end = _time(top.get("end"), "end")
    if end <= start:
        raise ScenarioError("end", "must be after start")
    workloads = tuple(
        _workload(w, f"workloads[{i}]") for i, w in enumerate(_list(top, "workloads"))
    )
    batch = tuple(_batch(b, f"batch[{i}]") for i, b in enumerate(_list(top, "batch")))
    clusters = tuple(_cluster(c, f"clusters[{i}]") for i, c in enumerate(_list(top, "clusters")))
    if workloads and not clusters:
        raise ScenarioError("clusters", "workloads need at least one cluster")
    if not workloads and not batch:
        raise ScenarioError("workloads", "a scenario needs workloads, batch pools or both")
    _unique([c.name for c in clusters], "clusters")
    _unique([w.name for w in workloads], "workloads")
    _unique([b.name for b in batch], "batch")
    policy = dict(_mapping(top.get("policy", {}), "policy"))
    for key, value in (overrides or {}).items():
        policy[key.removeprefix("policy.")] = yaml.safe_load(value)
    column = top.get("column", Column.LIFECYCLE.value)
    if column not in {c.value for c in Column}:
        raise ScenarioError("column", f"must be lifecycle or direct, got {column!r}")
    name = top.get("name", "scenario")
    return Scenario(
        name=str(name),
        description=str(top.get("description", "")).strip(),
        start=start,
        end=end,
        interval_hours=_int(top.get("interval_hours", 1), "interval_hours", minimum=1),
        column=Column(column),
        power_kw=_number(top.get("power_kw", 0.1), "power_kw"),
        clusters=clusters,
        workloads=workloads,
        batch=batch,
        policy=_policy(policy),
    )


def _mapping(value: object, key: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise ScenarioError(key, f"must be a mapping, got {type(value).__name__}")
    return value


def _list(top: Mapping[str, Any], key: str) -> list[Any]:
    value = top.get(key, [])
    if not isinstance(value, list):
        raise ScenarioError(key, f"must be a list, got {type(value).__name__}")
    return value


def _only(section: Mapping[str, Any], key: str, allowed: tuple[str, ...]) -> None:
    for k in section:
        if k not in allowed:
            where = f"{key}.{k}" if key else k
            raise ScenarioError(where, f"unknown key (known: {', '.join(allowed)})")


def _unique(names: list[str], key: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ScenarioError(key, f"name {name!r} is used twice")
        seen.add(name)


def _time(value: object, key: str) -> datetime:
    if isinstance(value, datetime):
        when = value
    elif isinstance(value, str):
        try:
            when = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise ScenarioError(key, f"must be an ISO-8601 time, got {value!r}") from None
    else:
        raise ScenarioError(key, "must be an ISO-8601 time such as 2023-01-01T00:00:00Z")
    when = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    if when.minute or when.second or when.microsecond:
        raise ScenarioError(key, "must be on the hour")
    return when


def _number(value: object, key: str, *, minimum: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < minimum:
        raise ScenarioError(key, f"must be a number >= {minimum:g}, got {value!r}")
    return float(value)


def _int(value: object, key: str, *, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ScenarioError(key, f"must be an integer >= {minimum}, got {value!r}")
    return value


def _name(body: Mapping[str, Any], key: str) -> str:
    name = body.get("name")
    if not isinstance(name, str) or not name:
        raise ScenarioError(f"{key}.name", "must be a non-empty string")
    return name


def _zone(body: Mapping[str, Any], key: str) -> str:
    zone = body.get("zone")
    if not isinstance(zone, str) or not zone:
        raise ScenarioError(f"{key}.zone", "must be a grid zone key such as DE or US-CAL-CISO")
    return zone


def _cluster(value: object, key: str) -> Cluster:
    body = _mapping(value, key)
    _only(body, key, ("name", "zone", "capacity"))
    capacity = _mapping(body.get("capacity", {}), f"{key}.capacity")
    _only(capacity, f"{key}.capacity", ("share", "replicas"))
    share = replicas = None
    if "share" in capacity:
        share = _number(capacity["share"], f"{key}.capacity.share")
        if not 0 < share <= 1:
            raise ScenarioError(f"{key}.capacity.share", f"must be in (0, 1], got {share:g}")
    if "replicas" in capacity:
        replicas = _int(capacity["replicas"], f"{key}.capacity.replicas", minimum=1)
    return Cluster(_name(body, key), _zone(body, key), share, replicas)


def _workload(value: object, key: str) -> Workload:
    body = _mapping(value, key)
    _only(body, key, ("name", "replicas", "movable", "run_hours", "every_hours", "offset_hours"))
    movable = body.get("movable", True)
    if not isinstance(movable, bool):
        raise ScenarioError(f"{key}.movable", "must be true or false")
    run = body.get("run_hours")
    every = body.get("every_hours")
    return Workload(
        name=_name(body, key),
        replicas=_int(body.get("replicas"), f"{key}.replicas", minimum=1),
        movable=movable,
        run_hours=None if run is None else _int(run, f"{key}.run_hours", minimum=1),
        every_hours=None if every is None else _int(every, f"{key}.every_hours", minimum=1),
        offset_hours=_int(body.get("offset_hours", 0), f"{key}.offset_hours"),
    )


def _batch(value: object, key: str) -> BatchPool:
    body = _mapping(value, key)
    _only(body, key, ("name", "zone", "length_hours", "slack_hours", "every_hours", "replicas"))
    return BatchPool(
        name=_name(body, key),
        zone=_zone(body, key),
        length_hours=_int(body.get("length_hours", 1), f"{key}.length_hours", minimum=1),
        slack_hours=_int(body.get("slack_hours", 24), f"{key}.slack_hours"),
        every_hours=_int(body.get("every_hours", 1), f"{key}.every_hours", minimum=1),
        replicas=_int(body.get("replicas", 1), f"{key}.replicas", minimum=1),
    )


def _policy(section: Mapping[str, Any]) -> PolicySettings:
    fields = {f.name for f in dataclasses.fields(PolicySettings)}
    _only(section, "policy", tuple(sorted(fields)))
    default = PolicySettings()
    values: dict[str, Any] = {}
    for name in fields:
        current = getattr(default, name)
        raw = section.get(name, current)
        key = f"policy.{name}"
        if isinstance(current, Method):
            if raw not in {m.value for m in Method}:
                known = ", ".join(m.value for m in Method)
                raise ScenarioError(key, f"must be one of {known}, got {raw!r}")
            values[name] = Method(raw)
        elif isinstance(current, int):
            values[name] = _int(raw, key, minimum=1)
        else:
            values[name] = _number(raw, key)
    if not values["margin"] < 1:
        raise ScenarioError("policy.margin", "must be below 1")
    if values["exponent"] <= 0:
        raise ScenarioError("policy.exponent", "must be > 0")
    return PolicySettings(**values)


def hour_index(scenario: Scenario, when: datetime) -> int:
    """Hours from the scenario start to ``when``."""
    return int((when - scenario.start) / timedelta(hours=1))
