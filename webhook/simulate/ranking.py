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
    nmae: float | None = None
    """Normalised mean absolute error of the forecast hours, in percent (ratio of sums)."""
    zone: str | None = None
    """The zone judged; None: every pool together."""


Pool = tuple[str, Sequence[float], int, int]
"""A batch pool to judge on: its zone, the zone's hourly values, job length and slack."""


def _tally(method: Method, pool: Pool, *, days: int, stride: int) -> Tally:
    _, values, length, slack = pool
    tally = Tally()
    horizon = slack + length - 1
    need = history_needed(method, horizon, days=days)
    for t in range(WARM_UP, len(values) - horizon, stride):
        history = values[max(0, t + 1 - need) : t + 1]
        forecast = outlook(method, history, horizon, days=days, at=t)
        truth = values[t : t + horizon + 1]
        tally.add(score(forecast, truth, length=length, slack=slack))
    return tally


def _ranking(method: Method, tally: Tally, zone: str | None) -> Ranking:
    q = tally.quality()
    return Ranking(method.value, q.windows, q.top, q.spearman, q.captured, q.nmae, zone)


def judge_each(
    method: Method, pools: Sequence[Pool], *, days: int, stride: int = STRIDE
) -> list[Ranking]:
    """``method``'s ranking quality over all ``pools`` together, then per zone (pools of
    one zone together, in the order the zones first appear)."""
    overall = Tally()
    by_zone: dict[str, Tally] = {}
    for pool in pools:
        tally = _tally(method, pool, days=days, stride=stride)
        overall.extend(tally)
        by_zone.setdefault(pool[0], Tally()).extend(tally)
    zones = [_ranking(method, t, zone) for zone, t in by_zone.items()]
    return [_ranking(method, overall, None), *zones]
