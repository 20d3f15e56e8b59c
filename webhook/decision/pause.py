"""The NodePool pause over time (strategy ``pause``): when a pause begins and when it ends.

A pool is paused (``spec.limits.cpu: "0"``, no new nodes) when the local grid is dirty
now compared with what the forecast shows within the pool's slack
(``carbonshift.io/max-pause``, default 24 h): a cleaner hour is coming. It is resumed
(the user's limits come back) when that hour comes, or at the latest once ``max-pause``
has passed since the pause began, even if the grid is still dirty. Without a forecast
(not enough history yet, ``reevaluate.forecast: none``) "dirty" is the absolute class:
it pauses while the class is high, as the class rule
(:func:`webhook.decision.karpenter.nodepool.pauses`) does, and still resumes at ``max-pause``.

With a forecast, the class does not gate the pause: a pool on a mid-class grid with a
strong solar dip ahead waits for the dip too. On the 2023 traces gating on the class
captures 59 % of the perfect-foresight saving, not gating 84 % (README "Carbon
results").

"A cleaner hour within the slack" is :func:`waits`: the same rule as the simulator's
forecast-driven pause policy (``pause_by_forecast``), on the same forecast
(:func:`webhook.decision.forecast.outlook`). The simulator's slack is the most urgent
job's deadline; a NodePool's is what is left of ``max-pause``.

Uncertainty (:data:`CONFIDENCE`): given the forecaster's past errors by hours ahead
(:class:`~webhook.decision.forecast_quality.Spread`), each forecast hour is read at the
value its truth stays under with probability ``confidence`` (:func:`surely`), so the pool
waits only for an hour that is greener than now with at least that probability. Off by
default: on the 2023 traces it holds less and captures less of the perfect-foresight
saving than the plain forecast (docs/results.md).

After any resume the pool runs for at least :data:`RUN_AT_LEAST` before a new pause, so
pending pods get nodes even when the grid stays dirty.

Pure: the time (``now``) and the forecast come in as data; the state (when the pause
began, when it last ended) lives in the decision annotation (``paused_at``,
``resumed_at``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from webhook.decision.forecast import best_start
from webhook.decision.forecast_quality import Spread
from webhook.model import vocabulary
from webhook.model.validation import InvalidInput

HOUR = timedelta(hours=1)
RUN_AT_LEAST = HOUR
"""After a resume, the pool is not paused again for this long."""
PAUSED_AT = "paused_at"
RESUMED_AT = "resumed_at"


CONFIDENCE: float | None = None
"""The hold rule's setting: wait only for an hour greener than now with at least this
probability by the forecaster's past errors (None: the forecast's greenest start decides
alone, the default)."""


def surely(series: Sequence[float], spread: Spread, confidence: float) -> list[float]:
    """``series`` (``[now, now+1 h, ...]``) with each forecast hour ``k`` at the value its
    truth stays under with probability ``confidence`` (:meth:`Spread.bound`); hours the
    spread holds too few errors for keep the forecast, and now stays as observed."""
    out = [series[0]]
    for k, value in enumerate(series[1:], start=1):
        bound = spread.bound(k, value, confidence)
        out.append(value if bound is None else bound)
    return out


def waits(
    series: Sequence[float],
    length: int,
    slack: int,
    *,
    spread: Spread | None = None,
    confidence: float | None = CONFIDENCE,
) -> bool:
    """True when a run of ``length`` hours is greener if started later, within ``slack``
    hours (``series[0]`` is now); with ``spread`` and ``confidence``, greener with at least
    that probability (:func:`surely`). The forecast rule the simulator's pause policies and
    the NodePool pause share."""
    return _greenest(series, length, slack, spread, confidence) > 0


def _greenest(
    series: Sequence[float],
    length: int,
    slack: int,
    spread: Spread | None,
    confidence: float | None,
) -> int:
    if spread is not None and confidence is not None:
        series = surely(series, spread, confidence)
    return best_start(series, length, slack)


@dataclasses.dataclass(frozen=True, slots=True)
class State:
    """What the decision annotation remembers about the pause."""

    paused_at: datetime | None = None
    """When the pause in force began (None: not paused by carbonshift)."""
    resumed_at: datetime | None = None
    """When the last pause ended."""

    @classmethod
    def of(cls, body: Mapping[str, Any]) -> State:
        """Read from a decision record's body; unreadable times count as absent."""
        return cls(_time(body.get(PAUSED_AT)), _time(body.get(RESUMED_AT)))

    def body(self) -> dict[str, str]:
        """The record body's entries for this state."""
        out = {}
        if self.paused_at is not None:
            out[PAUSED_AT] = vocabulary.format_time(self.paused_at)
        if self.resumed_at is not None:
            out[RESUMED_AT] = vocabulary.format_time(self.resumed_at)
        return out


@dataclasses.dataclass(frozen=True, slots=True)
class Step:
    """The pause decision at one moment."""

    paused: bool
    state: State
    why: str
    changed: bool
    """True when the pool starts or ends a pause now."""


def step(
    level: str | None,
    outlook: Sequence[float] | None,
    state: State,
    now: datetime,
    max_pause: timedelta,
    *,
    spread: Spread | None = None,
    confidence: float | None = CONFIDENCE,
) -> Step:
    """Whether the pool is paused at ``now``.

    ``level``: the local grid's class now (None: no data). ``outlook``:
    ``[now, now+1 h, ...]`` (:func:`webhook.decision.forecast.outlook`, or None without a
    forecast); only the hours within the slack are read. ``spread`` and ``confidence``:
    the hold rule under uncertainty (:func:`waits`).
    """
    paused_at = state.paused_at
    if paused_at is not None:
        used = max(now - paused_at, timedelta(0))
        if used >= max_pause:
            return _resume(state, now, f"max-pause {duration(max_pause)} used up")
        if level is None:
            return Step(
                True, state, "no intensity data; resuming at max-pause at the latest", False
            )
        if outlook is None:
            if level == "high":
                return Step(True, state, "still high (no forecast)", False)
            return _resume(state, now, f"the grid is {level} now (no forecast)")
        ahead = _greenest(outlook, 1, (max_pause - used) // HOUR, spread, confidence)
        if ahead > 0:
            return Step(True, state, f"the greenest hour within the slack is in {ahead} h", False)
        return _resume(state, now, "the greenest forecast hour within the slack has come")

    if level is None:
        return Step(False, state, "no intensity data", False)
    if outlook is None and level != "high":
        return Step(False, state, "the grid is not high (no forecast)", False)
    if state.resumed_at is not None and now - state.resumed_at < RUN_AT_LEAST:
        return Step(False, state, f"resumed less than {duration(RUN_AT_LEAST)} ago", False)
    started = dataclasses.replace(state, paused_at=now)
    limit = duration(max_pause)
    if outlook is None:
        return Step(True, started, f"high, no forecast: paused for at most {limit}", True)
    ahead = _greenest(outlook, 1, max_pause // HOUR, spread, confidence)
    if ahead == 0:
        return Step(False, state, f"no cleaner hour forecast within max-pause {limit}", False)
    return Step(True, started, f"a cleaner hour is forecast in {ahead} h (max-pause {limit})", True)


def _resume(state: State, now: datetime, why: str) -> Step:
    return Step(False, State(paused_at=None, resumed_at=now), why, True)


def duration(value: timedelta) -> str:
    """``24h``, ``90m`` → ``1h30m``: what ``carbonshift.io/max-pause`` reads."""
    minutes = int(value.total_seconds() // 60)
    hours, minutes = divmod(minutes, 60)
    if not minutes:
        return f"{hours}h"
    return f"{hours}h{minutes}m" if hours else f"{minutes}m"


def _time(raw: object) -> datetime | None:
    if not isinstance(raw, str):
        return None
    try:
        return vocabulary.timestamp(vocabulary.DECISION, raw)
    except InvalidInput:
        return None
