"""How well a forecast ranks the hours of a decision window, on the traces: the measure of
:mod:`webhook.decision.forecast_quality` (top quarter, Spearman, captured saving) over a
scenario's batch pools.

For a batch pool whose jobs run ``length`` hours and may wait ``slack`` hours, each
decision window is the ``slack + 1`` candidate starts from the current hour on, each
scored by its mean intensity over the ``length`` hours it would run: the truth from the
trace, the forecast from :func:`webhook.decision.forecast.outlook` on the past only (the
current hour observed, the rest forecast). Windows begin every :data:`STRIDE` hours
(coprime with 24, so every hour of the day is sampled) from the second day on, and lie
wholly inside the scenario.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from webhook.decision.forecast import HOURS_PER_DAY, Method, history_needed, outlook
from webhook.decision.forecast_quality import Tally, score

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


def judge(
    method: Method,
    pools: Sequence[tuple[Sequence[float], int, int]],
    *,
    days: int,
    stride: int = STRIDE,
) -> Ranking:
    """``method``'s ranking quality over ``pools``: (hourly values, length, slack) each."""
    tally = Tally()
    for values, length, slack in pools:
        horizon = slack + length - 1
        need = history_needed(method, horizon, days=days)
        for t in range(WARM_UP, len(values) - horizon, stride):
            history = values[max(0, t + 1 - need) : t + 1]
            forecast = outlook(method, history, horizon, days=days)
            truth = values[t : t + horizon + 1]
            tally.add(score(forecast, truth, length=length, slack=slack))
    q = tally.quality()
    return Ranking(method.value, q.windows, q.top, q.spearman, q.captured)
