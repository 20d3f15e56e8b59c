"""Holding a placement in force: the hysteresis and dwell a policy's placement passes
before a recomputed one replaces it (:class:`Proposal`), and the placement in force read
back as weights or fill tiers (:func:`in_force`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from webhook.decision.hysteresis import Held, Hysteresis, Verdict, judge
from webhook.decision.karmada.terms import OWN, TIER_DEPTH
from webhook.decision.karmada.view import green_terms
from webhook.decision.record import Record
from webhook.model import vocabulary

Warn = Callable[[str], None]

_TIER_WEIGHTS = tuple(2 ** (TIER_DEPTH - k) for k in range(TIER_DEPTH))
"""The weight :func:`in_force` gives each of the first :data:`TIER_DEPTH` tiers."""


def in_force(placement: Mapping[str, Any], weights: Mapping[str, int] | None) -> dict[str, int]:
    """A placement as the hysteresis compares it: weights on the clusters Karmada uses.

    With a green-first term, that term's clusters (Karmada tries it first; with static
    weights it never fails) at their static weights, else weight 1; without one, the
    static weights. Empty: neither.
    """
    tiers, green = green_terms(placement)
    if tiers:
        # Karmada fills the tiers in order: each weighs twice the next (from the tenth on, 1).
        out: dict[str, int] = {}
        for k, tier in enumerate(tiers):
            weight = _TIER_WEIGHTS[k] if k < TIER_DEPTH else 1
            for name in tier:
                out[name] = weight
        return out
    if green is not None:
        names = green.names
        weighted = {n: weights[n] for n in names if weights is not None and n in weights}
        return weighted or dict.fromkeys(names, 1)
    return dict(weights) if weights else {}


def in_hours(when: datetime) -> float:
    """``when`` in hours since the epoch (the hysteresis counts dwell in hours)."""
    return when.timestamp() / 3600


@dataclasses.dataclass(frozen=True, slots=True)
class Proposal:
    """The placement in force (as recorded) against a freshly computed one."""

    previous: Record
    current: Mapping[str, Any]
    new: Mapping[str, Any]
    weights: Mapping[str, int] | None
    intensities: Mapping[str, float | None]

    def keep(self, rule: Hysteresis, at: datetime | None, warn: Warn) -> bool:
        """True when the placement in force stays (:func:`hysteresis.judge`).

        Only a placement carbonshift itself put in force (recorded ``since``, fields
        still as written) is held; user edits and first decisions always go through.
        """
        previous, since = self.previous, self.previous.since
        if at is None or since is None or not previous.own:
            return False
        if not all(previous.owns(k, self.current.get(k[len(OWN) :])) for k in previous.own):
            return False
        try:
            started = in_hours(vocabulary.parse_time(since))
        except ValueError:
            return False
        recorded = {n: facts.weight for n, facts in previous.clusters.items()}
        held = in_force(self.current, {n: w for n, w in recorded.items() if w is not None})
        proposed = in_force(self.new, self.weights)
        now = in_hours(at)
        record = Held(held, started) if held else None
        verdict = judge(rule, record, proposed, self.intensities, now)
        if verdict is Verdict.DWELL:
            hours = now - started
            warn(f"carbonshift: placement kept: in force {hours:.1f} h of {rule.dwell_hours:g} h")
        elif verdict is Verdict.MARGIN:
            warn(f"carbonshift: placement kept: new one is not {rule.margin:.0%} greener")
        return verdict.keeps
