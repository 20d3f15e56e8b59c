"""Ranking by carbon intensity: greenness scores, replica weights, green-first order.

Weight formula (documented in the README)::

    w_i = max(1, round(scale * (I_min / I_i) ** exponent))

where ``I_min`` is the lowest intensity among the candidates (both floored at
:data:`FLOOR`). Then, walking from the dirtiest to the greenest candidate, every
weight is raised so that weights never decrease as intensity falls, and a candidate
whose intensity is at least :data:`DISTINCT` times lower than another's gets a
strictly higher weight (integer rounding alone could tie them).

Candidates with unknown intensity are weighted as if they had the mean intensity of
the known ones (neutral); if none is known every candidate gets ``scale``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

FLOOR = 1.0
"""gCO2eq/kWh used in place of smaller values so ratios stay finite."""
DISTINCT = 1.10
"""Intensities this many times apart always get strictly different weights."""
CEILING = 1000.0
"""Intensity (gCO2eq/kWh) at which greenness reaches 0."""
NEUTRAL_SCORE = 50
"""Score for a cluster or node whose intensity is unknown."""


def greenness(intensity: float | None, ceiling: float = CEILING) -> int:
    """Absolute score 0..100: 100 at zero emissions, 0 at ``ceiling`` and above.

    Absolute (not relative to the other candidates) so a cluster's score does not
    change when the candidate set does. Unknown intensity scores :data:`NEUTRAL_SCORE`.
    """
    if intensity is None:
        return NEUTRAL_SCORE
    clipped = min(max(intensity, 0.0), ceiling)
    return round(100 * (1 - clipped / ceiling))


def mean_known(intensities: Mapping[str, float | None]) -> float | None:
    """Mean of the known intensities, None when none is known."""
    known = [v for v in intensities.values() if v is not None]
    return math.fsum(known) / len(known) if known else None


def order_greenest(intensities: Mapping[str, float | None]) -> list[str]:
    """Names from greenest to dirtiest; unknown intensities last; ties by name."""
    return sorted(
        intensities,
        key=lambda n: (intensities[n] is None, intensities[n] or 0.0, n),
    )


def carbon_weights(
    intensities: Mapping[str, float | None], *, exponent: float = 1.0, scale: int = 100
) -> dict[str, int]:
    """Integer weights >= 1, greener higher (see the module docstring for the formula)."""
    if not intensities:
        return {}
    if exponent < 0 or scale < 1:
        raise ValueError("exponent must be >= 0 and scale >= 1")
    neutral = mean_known(intensities)
    if neutral is None or exponent == 0:  # nothing known, or even weights asked for
        return dict.fromkeys(intensities, scale)
    filled = {n: max(FLOOR, v if v is not None else neutral) for n, v in intensities.items()}
    lowest = min(filled.values())
    raw = {n: max(1, round(scale * (lowest / v) ** exponent)) for n, v in filled.items()}

    # Dirtiest first; keep weights monotone and strictly separated past DISTINCT.
    order = sorted(filled, key=lambda n: (-filled[n], n))
    weights: dict[str, int] = {}
    boundary = 0  # order[:boundary] are at least DISTINCT times dirtier than the current one
    best_dirtier = 0  # highest weight among order[:boundary]
    previous = 0
    for name in order:
        value = filled[name]
        while boundary < len(order) and filled[order[boundary]] >= DISTINCT * value:
            best_dirtier = max(best_dirtier, weights[order[boundary]])
            boundary += 1
        weight = max(raw[name], previous, best_dirtier + 1 if boundary else 1)
        weights[name] = weight
        previous = weight
    return {n: weights[n] for n in intensities}


def within_limit(
    intensities: Mapping[str, float | None], limit: float
) -> tuple[list[str], list[str]]:
    """Split names into (kept, dropped) by ``intensity <= limit``, greenest first.

    Unknown intensities are kept (nothing says they are above the limit). If every
    known candidate is above the limit and nothing unknown remains, the greenest one is
    kept so placement never becomes empty; callers warn when ``kept`` holds a cluster
    above the limit.
    """
    order = order_greenest(intensities)
    kept = [n for n in order if (v := intensities[n]) is None or v <= limit]
    if not kept and order:
        kept = order[:1]
    dropped = [n for n in order if n not in kept]
    return kept, dropped


def intensity_class(intensity: float, *, low_below: float, high_from: float) -> str:
    """``low`` below ``low_below``, ``high`` from ``high_from``, else ``medium``."""
    if intensity < low_below:
        return "low"
    if intensity >= high_from:
        return "high"
    return "medium"
