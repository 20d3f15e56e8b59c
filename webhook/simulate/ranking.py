"""How well a forecast ranks the hours of a decision window: the measure that matters for
shifting work in time, where only the order of the hours decides, not their level.

For a batch pool whose jobs run ``length`` hours and may wait ``slack`` hours, each
decision window is the ``slack + 1`` candidate starts from the current hour on, each
scored by its mean intensity over the ``length`` hours it would run: the truth from the
trace, the forecast from :func:`webhook.decision.forecast.outlook` on the past only (the
current hour observed, the rest forecast). Per window:

- ``top``: the share of the window's truly greenest quarter of starts (rounded up) that
  the forecast's greenest quarter also holds;
- ``spearman``: Spearman's rank correlation of forecast and truth over the starts (ties
  take their mean rank; 0 when either side is constant);
- ``captured``: what starting at the forecast's greenest start saves against starting
  now, as a share of what the truly greenest start saves (summed over the windows, ratio
  of sums): the saving a pause on this forecast could reach without deadlines or
  ``max-pause``.

The first two are means over windows; windows begin every :data:`STRIDE` hours (coprime
with 24, so every hour of the day is sampled) from the second day on, and lie wholly inside
the scenario.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from webhook.decision.forecast import (
    HOURS_PER_DAY,
    Method,
    best_start,
    history_needed,
    outlook,
)

STRIDE = 5
"""Hours between two sampled decision windows."""
WARM_UP = HOURS_PER_DAY
"""The first window begins once a day of history exists (before it, the profiles fall back
to the current reading)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Ranking:
    """A forecast's ranking quality over one or more pools' decision windows."""

    method: str
    windows: int
    top: float
    """Mean share of the truly greenest quarter of starts the forecast's quarter holds."""
    spearman: float
    """Mean Spearman rank correlation of forecast and truth over each window's starts."""
    captured: float | None
    """Saving of the forecast's greenest start over the truly greenest start's, against
    starting now (ratio of sums; None when starting now is always best)."""


def ranks(values: Sequence[float]) -> list[float]:
    """Ranks from 1 of ``values``, ties at their mean rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rank correlation of ``a`` and ``b`` (0 when either is constant)."""
    if len(a) != len(b):
        raise ValueError("series of different lengths")
    ra, rb = ranks(a), ranks(b)
    n = len(ra)
    ma, mb = math.fsum(ra) / n, math.fsum(rb) / n
    cov = math.fsum((x - ma) * (y - mb) for x, y in zip(ra, rb, strict=True))
    va = math.fsum((x - ma) ** 2 for x in ra)
    vb = math.fsum((y - mb) ** 2 for y in rb)
    return cov / math.sqrt(va * vb) if va > 0 and vb > 0 else 0.0


def top_share(truth: Sequence[float], forecast: Sequence[float], k: int) -> float:
    """Share of the ``k`` truly lowest positions that are among the forecast's ``k``
    lowest (ties broken by position, the earlier first, as :func:`best_start` does)."""
    true_k = set(sorted(range(len(truth)), key=lambda i: (truth[i], i))[:k])
    picked = set(sorted(range(len(forecast)), key=lambda i: (forecast[i], i))[:k])
    return len(true_k & picked) / k


def _starts(series: Sequence[float], length: int, slack: int) -> list[float]:
    """Mean of ``series`` over each run of ``length`` hours starting at 0..slack."""
    return [math.fsum(series[s : s + length]) / length for s in range(slack + 1)]


def window(
    truth: Sequence[float], forecast: Sequence[float], length: int, slack: int
) -> tuple[float, float, float, float]:
    """One window's ``top``, ``spearman``, and the savings (forecast's start, best start)
    against starting now; ``truth`` and ``forecast`` cover ``slack + length`` hours."""
    real = _starts(truth, length, slack)
    guess = _starts(forecast, length, slack)
    k = max(1, math.ceil(len(real) / 4))
    chosen = best_start(forecast, length, slack)
    best = best_start(truth, length, slack)
    return (
        top_share(real, guess, k),
        spearman(real, guess),
        real[0] - real[chosen],
        real[0] - real[best],
    )


def judge(
    method: Method,
    pools: Sequence[tuple[Sequence[float], int, int]],
    *,
    days: int,
    stride: int = STRIDE,
) -> Ranking:
    """``method``'s ranking quality over ``pools``: (hourly values, length, slack) each."""
    tops: list[float] = []
    rhos: list[float] = []
    got = best = 0.0
    for values, length, slack in pools:
        horizon = slack + length - 1
        need = history_needed(method, horizon, days=days)
        for t in range(WARM_UP, len(values) - horizon, stride):
            history = values[max(0, t + 1 - need) : t + 1]
            forecast = outlook(method, history, horizon, days=days)
            top, rho, saved, possible = window(values[t : t + horizon + 1], forecast, length, slack)
            tops.append(top)
            rhos.append(rho)
            got += saved
            best += possible
    n = len(tops)
    return Ranking(
        method.value,
        n,
        math.fsum(tops) / n if n else 0.0,
        math.fsum(rhos) / n if n else 0.0,
        100.0 * got / best if best > 0 else None,
    )
