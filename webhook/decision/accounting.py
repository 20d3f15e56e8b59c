"""Carbon accounting: what a managed workload emitted, and what it would have without carbonshift.

GSF SCI style (Software Carbon Intensity, ISO/IEC 21031:2024, ``SPEC.md`` 1.1.0):
``C = O + M`` with ``O = E x I``, for one managed object over one interval.

- **E** (kWh), energy. ``method="coefficient"``: replicas x requested vCPU x
  ``watts_per_vcpu`` x PUE x hours / 1000, Cloud Carbon Footprint's compute formula
  (``packages/core/src/compute/ComputeEstimator.ts``: ``kWh = averageWatts x vCpuHours x
  PUE / 1000`` with ``averageWatts = minWatts + utilisation x (maxWatts - minWatts)``); the
  default 2.12 W/vCPU is CCF's AWS fallback (``MIN_WATTS_AVG`` 0.74, ``MAX_WATTS_AVG`` 3.5,
  ``AwsFootprintEstimationConstants.ts``) at CCF's default 50 % utilisation.
  ``method="kepler"``: the joules Kepler (v0.10+) measured over the interval, / 3.6e6:
  ``kepler_pod_cpu_joules_total`` summed over a workload's pods per member cluster
  (:func:`workload_joules`), ``kepler_node_cpu_joules_total`` summed over a NodePool's
  nodes per zone. Always of one Kepler energy ``zone`` (RAPL zones overlap: ``package``
  includes ``core`` and ``uncore``), never summed across zones. Kepler attributes only
  the active share of a node's energy to pods, so the pod figure leaves idle power out.
- **I** (gCO2eq/kWh): the location-based intensity of the grid zone the replicas really
  ran in, as the feed answers it, with its signal (average or marginal) and provider.
- **M** (g), embodied, optional: vCPU-hours x ``embodied_g_per_vcpu_hour``. A cited value:
  CCF's ``EmbodiedEmissionsEstimator.ts`` spreads an ``m5`` host's 1.6103792 tCO2e over
  ``SERVER_EXPECTED_LIFESPAN`` 35040 h and its 96 vCPU: 0.479 g per vCPU-hour. Embodied
  emissions do not depend on where a replica runs, so they never change what is avoided.

The **counterfactual** is the same replicas placed as the user's own policy would have
placed them without carbonshift: the placement with every field carbonshift owns put
back to the user's value (the decision record's ``orig``,
:func:`~webhook.decision.record.user_view`), divided by the same code the simulator
and the leader use (:func:`~webhook.decision.karmada.division.divide_static` for static weights
and for a plain Divided policy without weights, an even split;
:func:`~webhook.decision.karmada.division.divide_available` /
:func:`~webhook.decision.karmada.capacity.tier_fill` by available replicas and
:func:`~webhook.decision.karmada.division.divide_aggregated` for Aggregated, where the room is
known). Its energy is
the actual energy per replica (a replica needs the same energy wherever it runs), and
its emissions come from :func:`operational`, the function the actual goes through too.
``avoided = counterfactual - actual``.

Every :class:`Figure` carries its signal, method and provider; :class:`Totals` refuses
to add figures of another signal or method (:class:`MixedSignals`). No I/O, no clock.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from webhook.decision.record import Record
from webhook.model.errors import AccountingError, MixedSignals
from webhook.model.intensity import Signal
from webhook.model.objects import meta_of
from webhook.model.vocabulary import DECISION

Method = Literal["coefficient", "kepler"]
JOULES_PER_KWH = 3.6e6

CCF_WATTS_PER_VCPU = 2.12
"""CCF's AWS fallback (0.74 W min, 3.5 W max per vCPU) at 50 % utilisation."""
CCF_EMBODIED_G_PER_VCPU_HOUR = 0.479
"""CCF's ``m5`` host (1.6103792 tCO2e) over 35040 h and 96 vCPU; off unless configured."""


@dataclasses.dataclass(frozen=True, slots=True)
class Coefficients:
    """How energy is estimated where it is not measured."""

    watts_per_vcpu: float = CCF_WATTS_PER_VCPU
    pue: float = 1.0
    embodied_g_per_vcpu_hour: float | None = None
    """None: embodied emissions are not counted."""

    def __post_init__(self) -> None:
        if self.watts_per_vcpu <= 0 or self.pue < 1:
            raise AccountingError("watts_per_vcpu must be > 0 and pue >= 1")
        if self.embodied_g_per_vcpu_hour is not None and self.embodied_g_per_vcpu_hour < 0:
            raise AccountingError("embodied_g_per_vcpu_hour must be >= 0")


@dataclasses.dataclass(frozen=True, slots=True)
class Intensity:
    """The intensity one place ran at over the interval."""

    value: float
    signal: Signal
    provider: str


@dataclasses.dataclass(frozen=True, slots=True)
class Figure:
    """Energy and emissions of one placement over one interval."""

    kwh: float
    grams: float
    """Operational plus embodied."""
    embodied_grams: float
    signal: Signal
    method: Method
    provider: str
    by_place: Mapping[str, float] = dataclasses.field(default_factory=dict)
    """Operational grams per cluster (or grid zone)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Interval:
    """One object's accounting for one interval."""

    actual: Figure
    counterfactual: Figure

    @property
    def avoided_grams(self) -> float:
        return self.counterfactual.grams - self.actual.grams


def energy_kwh(vcpu: float, hours: float, coefficients: Coefficients) -> float:
    """CCF's compute energy for ``vcpu`` vCPUs over ``hours`` hours."""
    if vcpu < 0 or hours < 0:
        raise AccountingError("vCPU and hours must be >= 0")
    return coefficients.watts_per_vcpu * vcpu * hours * coefficients.pue / 1000.0


def kepler_kwh(joules: float) -> float:
    """Kepler's joules as kWh."""
    if joules < 0:
        raise AccountingError("joules must be >= 0")
    return joules / JOULES_PER_KWH


_POD_SUFFIX = {
    "Deployment": r"-[a-z0-9]{1,10}-[a-z0-9]{5}",  # <ReplicaSet hash>-<pod suffix>
    "StatefulSet": r"-[0-9]+",
}
_OTHER_POD_SUFFIX = r"-[a-z0-9]{5}"  # ReplicaSet, DaemonSet, Job: <name>-<suffix>


def owns_pod(kind: str, name: str, pod: str) -> bool:
    """Whether ``pod`` is named as a pod of the workload ``kind``/``name`` (the names the
    controllers give: a Deployment's ``web-7d9c5b8f6d-x2x9q``, a StatefulSet's ``db-0``);
    a pod of a workload whose name merely starts with ``name-`` does not match."""
    suffix = _POD_SUFFIX.get(kind, _OTHER_POD_SUFFIX)
    return re.fullmatch(re.escape(name) + suffix, pod) is not None


@dataclasses.dataclass(frozen=True, slots=True)
class PodJoules:
    """Joules one pod used over an interval as Kepler measured them (one energy zone)."""

    cluster: str
    namespace: str
    pod: str
    joules: float


def workload_joules(
    pods: Iterable[PodJoules], kind: str, namespace: str, name: str
) -> dict[str, float]:
    """Member cluster -> joules of the workload's pods there."""
    out: dict[str, float] = {}
    for p in pods:
        if p.namespace == namespace and owns_pod(kind, name, p.pod):
            out[p.cluster] = out.get(p.cluster, 0.0) + max(0.0, p.joules)
    return out


def measured(joules: Mapping[str, float], actual: Mapping[str, int]) -> dict[str, float] | None:
    """``joules`` when Kepler measured every cluster the replicas ran in, else None (the
    figure is then estimated for all of them: one method per figure)."""
    ran = {c for c, n in actual.items() if n > 0}
    if not ran or not ran <= {c for c, j in joules.items() if j > 0}:
        return None
    return {c: joules[c] for c in sorted(ran)}


def _one_signal(used: Iterable[Intensity]) -> tuple[Signal, str]:
    found = list(used)
    signals = {i.signal for i in found}
    if len(signals) > 1:
        raise MixedSignals(
            "intensities of different signals (" + ", ".join(sorted(signals)) + ") in one figure"
        )
    if not found:
        return Signal.AVERAGE, ""
    return found[0].signal, ",".join(sorted({i.provider for i in found}))


def operational(
    kwh_by_place: Mapping[str, float],
    intensities: Mapping[str, Intensity],
    *,
    method: Method,
    embodied_grams: float = 0.0,
) -> Figure:
    """Emissions of energy used per place: Σ E x I (+ embodied). Every place with energy
    needs an intensity (:class:`AccountingError` otherwise) and they share one signal."""
    used = {p: kwh for p, kwh in kwh_by_place.items() if kwh > 0}
    missing = sorted(p for p in used if p not in intensities)
    if missing:
        raise AccountingError("no intensity for " + ", ".join(missing))
    signal, provider = _one_signal(intensities[p] for p in sorted(used))
    by_place = {p: kwh * intensities[p].value for p, kwh in sorted(used.items())}
    return Figure(
        kwh=sum(used.values()),
        grams=sum(by_place.values()) + embodied_grams,
        embodied_grams=embodied_grams,
        signal=signal,
        method=method,
        provider=provider,
        by_place=by_place,
    )


def account(
    actual: Mapping[str, int],
    counterfactual: Mapping[str, int],
    intensities: Mapping[str, Intensity],
    *,
    vcpu_per_replica: float,
    hours: float,
    coefficients: Coefficients,
    joules: Mapping[str, float] | None = None,
) -> Interval:
    """Actual and counterfactual figures of replicas per place over ``hours``.

    ``joules``: Kepler's measured energy per place of the actual placement over the
    interval (method ``kepler``); without it the energy is estimated (``coefficient``).
    The counterfactual's energy per replica is the actual's mean per replica."""
    replicas = sum(n for n in actual.values() if n > 0)
    vcpu_hours = replicas * vcpu_per_replica * hours
    embodied = 0.0
    if coefficients.embodied_g_per_vcpu_hour is not None:
        embodied = vcpu_hours * coefficients.embodied_g_per_vcpu_hour
    method: Method
    if joules is not None:
        method = "kepler"
        kwh_actual = {p: kepler_kwh(j) for p, j in joules.items()}
    else:
        method = "coefficient"
        per = energy_kwh(vcpu_per_replica, hours, coefficients)
        kwh_actual = {p: n * per for p, n in actual.items() if n > 0}
    per_replica = sum(kwh_actual.values()) / replicas if replicas else 0.0
    kwh_cf = {p: n * per_replica for p, n in counterfactual.items() if n > 0}
    # The counterfactual moves the same replicas: its embodied share is the same.
    cf_embodied = embodied * (sum(counterfactual.values()) / replicas) if replicas else 0.0
    return Interval(
        actual=operational(kwh_actual, intensities, method=method, embodied_grams=embodied),
        counterfactual=operational(kwh_cf, intensities, method=method, embodied_grams=cf_embodied),
    )


# --- the counterfactual placement --------------------------------------------------------


def record_of(obj: Mapping[str, Any]) -> Record:
    """The object's decision record (empty when there is none)."""
    return Record.decode(meta_of(obj).annotations.get(DECISION))


def spread_evenly(total: float, places: Iterable[str]) -> dict[str, float]:
    """``total`` shared equally by ``places``."""
    names = sorted(set(places))
    return {n: total / len(names) for n in names} if names else {}


# --- sums ----------------------------------------------------------------------------------


@dataclasses.dataclass(slots=True)
class Totals:
    """Running sums of one object's (or one report row's) figures: one signal, one method."""

    signal: Signal | None = None
    method: Method | None = None
    provider: str = ""
    kwh: float = 0.0
    grams: float = 0.0
    counterfactual_grams: float = 0.0
    embodied_grams: float = 0.0
    hours: float = 0.0

    @property
    def avoided_grams(self) -> float:
        return self.counterfactual_grams - self.grams

    @property
    def saved_percent(self) -> float | None:
        """Avoided as a share of the counterfactual; None when that is 0."""
        if self.counterfactual_grams <= 0:
            return None
        return 100.0 * self.avoided_grams / self.counterfactual_grams

    def _check(self, signal: Signal, method: Method) -> None:
        if self.signal is not None and signal != self.signal:
            raise MixedSignals(
                f"cannot add {signal} intensity figures to {self.signal} ones: report them apart"
            )
        if self.method is not None and method != self.method:
            raise MixedSignals(f"cannot add {method} energy figures to {self.method} ones")

    def add(self, interval: Interval, hours: float) -> None:
        """Add one interval's figures (refused when its signal or method differs)."""
        actual = interval.actual
        self._check(actual.signal, actual.method)
        self._check(interval.counterfactual.signal, interval.counterfactual.method)
        self.signal, self.method = actual.signal, actual.method
        providers = {p for p in (self.provider, actual.provider) if p}
        self.provider = ",".join(sorted(set(",".join(providers).split(",")) - {""}))
        self.kwh += actual.kwh
        self.grams += actual.grams
        self.counterfactual_grams += interval.counterfactual.grams
        self.embodied_grams += actual.embodied_grams
        self.hours += hours

    def merge(self, other: Totals) -> None:
        """Add another row's sums (same rule)."""
        if other.signal is None or other.method is None:
            return
        self._check(other.signal, other.method)
        self.signal, self.method = other.signal, other.method
        providers = {p for p in (self.provider, other.provider) if p}
        self.provider = ",".join(sorted(set(",".join(providers).split(",")) - {""}))
        self.kwh += other.kwh
        self.grams += other.grams
        self.counterfactual_grams += other.counterfactual_grams
        self.embodied_grams += other.embodied_grams
        self.hours += other.hours

    def to_json(self) -> dict[str, Any]:
        """Plain data for persistence and reports."""
        return {
            "signal": str(self.signal) if self.signal else None,
            "method": self.method,
            "provider": self.provider,
            "kwh": self.kwh,
            "grams": self.grams,
            "counterfactual_grams": self.counterfactual_grams,
            "embodied_grams": self.embodied_grams,
            "hours": self.hours,
        }

    @classmethod
    def from_json(cls, data: object) -> Totals:
        """Read what :meth:`to_json` wrote; anything malformed reads as empty sums."""
        if not isinstance(data, Mapping):
            return cls()
        try:
            signal = Signal(data["signal"]) if data.get("signal") else None
            method = data.get("method")
            return cls(
                signal=signal,
                method=method if method in ("coefficient", "kepler") else None,
                provider=str(data.get("provider") or ""),
                kwh=float(data.get("kwh") or 0.0),
                grams=float(data.get("grams") or 0.0),
                counterfactual_grams=float(data.get("counterfactual_grams") or 0.0),
                embodied_grams=float(data.get("embodied_grams") or 0.0),
                hours=float(data.get("hours") or 0.0),
            )
        except (ValueError, TypeError):
            return cls()
