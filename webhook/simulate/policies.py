"""The policies a simulation compares, built from the decision core only.

Spatial policies say, for one workload (one PropagationPolicy), where its replicas
should go, as the *intent* carbonshift would write into the policy: a static weight
list (:class:`Weights`) or an ordered list of green-first affinity terms
(:class:`Terms`). The engine then divides replicas the way Karmada does. Each policy
combines a proposal (how intensities become an intent, always via
:mod:`webhook.decision.ranking`) with a schedule: at creation only, at every
re-evaluation, or at every re-evaluation filtered by
:mod:`webhook.decision.hysteresis`.

Batch (temporal) policies decide, hour by hour, whether a zone's NodePool is paused
(limits cpu 0: no new nodes, pending jobs wait).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

from webhook.decision import hysteresis
from webhook.decision.forecast import Method, best_start, history_needed, outlook
from webhook.decision.ranking import carbon_weights, intensity_class, order_greenest, within_limit
from webhook.simulate.scenario import PolicySettings

# --- spatial -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Weights:
    """Intent: a ``staticWeightList`` (clusters absent or at 0 take no replicas)."""

    weights: tuple[tuple[str, int], ...]

    def as_weights(self) -> dict[str, int]:
        """Weight per cluster."""
        return dict(self.weights)


@dataclasses.dataclass(frozen=True, slots=True)
class Terms:
    """Intent: ``clusterAffinities`` tried in order, each term a set of cluster names."""

    terms: tuple[tuple[str, ...], ...]

    def as_weights(self) -> dict[str, int]:
        """The first term's clusters, equally weighted (what the hysteresis compares)."""
        return dict.fromkeys(self.terms[0], 1) if self.terms else {}


Intent = Weights | Terms
Propose = Callable[[Mapping[str, float]], Intent]
"""Turns intensities per cluster into an intent."""


def _weights(values: Mapping[str, int]) -> Weights:
    return Weights(tuple(sorted(values.items())))


def propose_even(intensities: Mapping[str, float]) -> Intent:
    """Every cluster weight 1 (carbon-agnostic)."""
    return _weights(dict.fromkeys(intensities, 1))


def propose_top_n(n: int) -> Propose:
    """The ``n`` greenest clusters, weight 1 each (the greedy operator's clusterNames)."""

    def propose(intensities: Mapping[str, float]) -> Intent:
        return _weights(dict.fromkeys(order_greenest(intensities)[:n], 1))

    return propose


def propose_carbon(exponent: float, scale: int) -> Propose:
    """carbonshift's static weights for every cluster."""

    def propose(intensities: Mapping[str, float]) -> Intent:
        return _weights(carbon_weights(intensities, exponent=exponent, scale=scale))

    return propose


def propose_limited(limit: float, exponent: float, scale: int) -> Propose:
    """carbonshift's weights over the clusters at or below the max-intensity limit."""

    def propose(intensities: Mapping[str, float]) -> Intent:
        kept, _ = within_limit(intensities, limit)
        kept_values = {n: intensities[n] for n in kept}
        return _weights(carbon_weights(kept_values, exponent=exponent, scale=scale))

    return propose


def propose_green_first(max_clusters: int) -> Propose:
    """Green-first affinities: the ``max_clusters`` greenest, then one more per fallback."""

    def propose(intensities: Mapping[str, float]) -> Intent:
        order = order_greenest(intensities)
        first = min(max_clusters, len(order))
        return Terms(tuple(tuple(order[:k]) for k in range(first, len(order) + 1)))

    return propose


@dataclasses.dataclass(frozen=True, slots=True)
class Held:
    """A workload's placement in force: the intent and the hysteresis record behind it."""

    intent: Intent
    record: hysteresis.Held


@dataclasses.dataclass(frozen=True, slots=True)
class SpatialPolicy:
    """One spatial policy: a proposal plus when (and how reluctantly) it is re-applied."""

    key: str
    label: str
    propose: Propose
    reevaluate: bool = False
    """Re-evaluate movable workloads every interval (else: decided at creation only)."""
    rule: hysteresis.Hysteresis | None = None
    """Switching rule for re-evaluations; None switches whenever the proposal changes."""
    forecast: Method | None = None
    """Rank on the forecast mean over ``horizon_hours`` instead of the current intensity."""
    horizon_hours: int = 1
    info: str = "current intensity"
    """Which intensity information the policy uses (shown in the results)."""

    def decide(
        self, proposal: Intent, intensities: Mapping[str, float], held: Held | None, now: float
    ) -> Held:
        """The placement to have at ``now`` given this hour's ``proposal`` and what is held.

        ``proposal`` is ``self.propose(intensities)``, computed once per hour by the
        caller; ``held`` is None at creation.
        """
        if held is None or self.rule is None:
            return Held(proposal, hysteresis.Held(proposal.as_weights(), now))
        record = hysteresis.step(self.rule, held.record, proposal.as_weights(), intensities, now)
        return held if record is held.record else Held(proposal, record)


def spatial_policies(settings: PolicySettings, clusters: Sequence[str]) -> list[SpatialPolicy]:
    """The spatial line-up: baseline first, then the policies under comparison."""
    s = settings
    rule = hysteresis.Hysteresis(margin=s.margin, dwell_hours=s.dwell_hours)
    carbon = propose_carbon(s.exponent, s.scale)
    horizon = s.forecast_hours
    forecast_info = f"{s.forecast.value} forecast, mean over {horizon} h"
    top_n = min(s.top_n, len(clusters))
    return [
        SpatialPolicy("baseline", "carbon-agnostic: even split, fixed", propose_even, info="none"),
        SpatialPolicy(
            f"greedy-top{top_n}",
            f"greedy top-{top_n}, re-ranked every interval",
            propose_top_n(top_n),
            reevaluate=True,
        ),
        SpatialPolicy(
            "static-weights",
            "carbon weights at creation only",
            carbon,
            info="intensity at creation",
        ),
        SpatialPolicy(
            "weights-hysteresis",
            "carbon weights, re-evaluated with hysteresis + dwell",
            carbon,
            reevaluate=True,
            rule=rule,
        ),
        SpatialPolicy(
            "weights-forecast",
            "carbon weights on a forecast, hysteresis + dwell",
            carbon,
            reevaluate=True,
            rule=rule,
            forecast=s.forecast,
            horizon_hours=horizon,
            info=forecast_info,
        ),
        SpatialPolicy(
            "green-first",
            f"green-first affinities (max {min(s.max_clusters, len(clusters))}) with fallback,"
            " hysteresis + dwell",
            propose_green_first(s.max_clusters),
            reevaluate=True,
            rule=rule,
        ),
        SpatialPolicy(
            "green-first-forecast",
            "green-first affinities on a forecast, hysteresis + dwell",
            propose_green_first(s.max_clusters),
            reevaluate=True,
            rule=rule,
            forecast=s.forecast,
            horizon_hours=horizon,
            info=forecast_info,
        ),
        SpatialPolicy(
            "max-intensity",
            f"max-intensity filter ({s.max_intensity:g}) + weights, hysteresis + dwell",
            propose_limited(s.max_intensity, s.exponent, s.scale),
            reevaluate=True,
            rule=rule,
        ),
    ]


# --- temporal ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class PoolMoment:
    """What a pause decision may look at for one NodePool in one hour."""

    hour: int
    value: float
    """The zone's intensity now."""
    urgency: int
    """Hours until the most urgent pending job must start (0 = now)."""
    length: int
    """Run time of the jobs (hours)."""
    history: Callable[[int], Sequence[float]]
    """``history(n)``: the last ``n`` observed values, ending now."""


Pause = Callable[[PoolMoment], bool]


def pause_never(_: PoolMoment) -> bool:
    """Run on arrival."""
    return False


def pause_by_class(low_below: float, high_from: float) -> Pause:
    """Paused while the zone's intensity class is ``high`` (the NodePool rule)."""

    def paused(m: PoolMoment) -> bool:
        return intensity_class(m.value, low_below=low_below, high_from=high_from) == "high"

    return paused


def pause_by_forecast(method: Method, days: int) -> Pause:
    """Paused while the forecast shows a greener start before the most urgent deadline."""

    def paused(m: PoolMoment) -> bool:
        horizon = m.urgency + m.length - 1
        history = m.history(history_needed(method, horizon, days=days))
        series = outlook(method, history, horizon, days=days)
        return best_start(series, m.length, m.urgency) > 0

    return paused


@dataclasses.dataclass(frozen=True, slots=True)
class PausePolicy:
    """One batch policy: when a NodePool is paused."""

    key: str
    label: str
    paused: Pause
    deadline_guard: bool = True
    """Unpause when a pending job would otherwise miss its deadline."""
    info: str = "current intensity"


def batch_policies(settings: PolicySettings) -> list[PausePolicy]:
    """The temporal line-up: baseline first."""
    s = settings
    by_class = pause_by_class(s.low_below, s.high_from)
    return [
        PausePolicy("run-now", "carbon-agnostic: run on arrival", pause_never, info="none"),
        PausePolicy(
            "pause-class",
            f"pause while class is high (>= {s.high_from:g}), no deadline guard",
            by_class,
            deadline_guard=False,
        ),
        PausePolicy("pause-class-deadline", "pause while class is high, deadline guard", by_class),
        PausePolicy(
            "pause-forecast",
            "pause until the forecast's greenest start, deadline guard",
            pause_by_forecast(s.forecast, s.forecast_days),
            info=f"{s.forecast.value} forecast ({s.forecast_days} days)",
        ),
    ]
