"""Hysteresis and minimum dwell: when a re-evaluated placement is worth switching to.

Re-ranking clusters every interval follows every wiggle of the grid and moves replicas
back and forth (flapping). Here a placement, expressed as weights per cluster (the
static weights written into a PropagationPolicy, or the clusters of the first
green-first affinity term with equal weights), is scored by its *expected intensity*:
the weight-averaged intensity of its clusters. A newly proposed placement replaces
the held one only when both hold:

- the held placement has been in force for at least ``dwell_hours``, and
- the proposal's expected intensity is lower than the held one's by more than
  ``margin`` (relative), both evaluated on the same intensities.

:func:`judge` is the rule, and the only one: the placement deciders
(:mod:`webhook.decision.karmada.placement`, :mod:`webhook.decision.liqo.offloading`) decide
through it,
on a refresh and in the leader's re-evaluation, which the simulator runs as it is. Pure
functions, no I/O: the placement in force and its start live in the decision annotation.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Mapping

from webhook.decision.ranking import mean_known
from webhook.model.config import HysteresisConfig

Hysteresis = HysteresisConfig
"""The switching rule's two knobs are the configuration's ``hysteresis`` section itself
(``margin``: relative improvement in expected intensity needed to switch; ``dwell_hours``:
minimum time a placement stays in force), bounds checked where it is parsed."""

NO_HYSTERESIS = Hysteresis(margin=0.0, dwell_hours=0.0)
"""Switch on any improvement at once (the decision inputs' default)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Held:
    """The placement in force and since when."""

    weights: Mapping[str, int]
    """Weight per cluster name (clusters without weight take no replicas)."""
    since: float
    """When it was put in force, on any clock counted in hours (e.g. epoch seconds / 3600)."""


def expected_intensity(
    weights: Mapping[str, float], intensities: Mapping[str, float | None]
) -> float | None:
    """Weight-averaged intensity of a placement; None when it has no weight.

    A cluster whose intensity is unknown (missing or None) counts at the mean of the
    known ones, as the ranking does; with nothing known the answer is None.
    """
    total = math.fsum(w for w in weights.values() if w > 0)
    if total <= 0:
        return None
    neutral = mean_known(intensities)
    acc = 0.0
    for name, weight in weights.items():
        if weight <= 0:
            continue
        value = intensities.get(name)
        if value is None:
            if neutral is None:
                return None
            value = neutral
        acc += weight * value
    return acc / total


def should_switch(
    rule: Hysteresis, *, held_cost: float | None, proposed_cost: float | None, held_hours: float
) -> bool:
    """Whether a proposal with ``proposed_cost`` should replace a placement held so long.

    An unknown held cost (nothing known about the held clusters) allows the switch once
    the dwell has passed; an unknown proposed cost never wins.
    """
    if held_hours < rule.dwell_hours or proposed_cost is None:
        return False
    if held_cost is None:
        return True
    return proposed_cost < held_cost * (1.0 - rule.margin)


class Verdict(enum.Enum):
    """What :func:`judge` says about a proposal."""

    NEW = "new"
    """Nothing comparable is held (first decision, or a placement without clusters): take it."""
    SAME = "same"
    """The proposal is the placement in force: that stays, as written and since when it was."""
    SWITCH = "switch"
    """Dwell passed and the proposal is greener by more than the margin: switch now."""
    DWELL = "dwell"
    """Held: the placement in force has not been in force for ``dwell_hours`` yet."""
    MARGIN = "margin"
    """Held: the proposal is not greener by more than the margin."""

    @property
    def keeps(self) -> bool:
        """True when the placement in force stays and the proposal is dropped."""
        return self in (Verdict.SAME, Verdict.DWELL, Verdict.MARGIN)


def judge(
    rule: Hysteresis,
    held: Held | None,
    proposed: Mapping[str, int],
    intensities: Mapping[str, float | None],
    now: float,
) -> Verdict:
    """Whether ``proposed`` replaces the placement ``held`` at ``now`` (see the module doc).

    Both placements are weights per cluster and are scored on the same ``intensities``.
    """
    if held is None or not held.weights or not proposed:
        return Verdict.NEW
    if dict(held.weights) == dict(proposed):
        return Verdict.SAME
    held_hours = now - held.since
    if held_hours < rule.dwell_hours:
        return Verdict.DWELL
    switch = should_switch(
        rule,
        held_cost=expected_intensity(held.weights, intensities),
        proposed_cost=expected_intensity(proposed, intensities),
        held_hours=held_hours,
    )
    return Verdict.SWITCH if switch else Verdict.MARGIN
