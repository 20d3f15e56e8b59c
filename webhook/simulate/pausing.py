"""The NodePool pause the webhook runs over time (:func:`webhook.decision.pause.step`).

Unlike the stateless pause rules in :mod:`webhook.simulate.policies`, this one remembers,
as the webhook's decision annotation does, when the pause in force began and when the
last one ended. It is paused while the grid is high and (with a forecast) a cleaner
hour is forecast within ``max-pause``, and is resumed at that hour or once ``max-pause``
has passed. The webhook knows nothing of the jobs' deadlines: ``max-pause`` is the
only limit. One instance serves one NodePool at a time; the engine calls
:meth:`OverTime.reset` before each pool.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from webhook.decision import ladder, pause
from webhook.decision.forecast import Method, history_needed, outlook
from webhook.decision.ranking import intensity_class

if TYPE_CHECKING:
    from webhook.simulate.policies import PoolMoment

_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
"""Simulated hour 0 (the rule depends on elapsed time only)."""


class OverTime:
    """A pause decision for :class:`~webhook.simulate.policies.PausePolicy`, with state."""

    def __init__(
        self,
        *,
        low_below: float,
        high_from: float,
        max_pause: timedelta,
        forecast: Method | None = None,
        days: int = 7,
    ) -> None:
        self.low_below = low_below
        self.high_from = high_from
        self.max_pause = max_pause
        self.forecast = forecast
        self.days = days
        self.state = pause.State()

    def reset(self) -> None:
        """Forget the previous pool's pause."""
        self.state = pause.State()

    def inputs(self, m: PoolMoment) -> tuple[str, Sequence[float] | None, datetime]:
        """The class, the forecast over ``max-pause`` (None without) and the time at ``m``,
        as the webhook's re-evaluation gives them."""
        level = intensity_class(m.value, low_below=self.low_below, high_from=self.high_from)
        series = None
        if self.forecast is not None:
            horizon = max(self.max_pause // pause.HOUR, 1)
            needed = history_needed(self.forecast, horizon, days=self.days)
            series = outlook(self.forecast, m.history(needed), horizon, days=self.days)
        return level, series, _EPOCH + timedelta(hours=m.hour)

    def __call__(self, m: PoolMoment) -> bool:
        level, series, now = self.inputs(m)
        step = pause.step(level, series, self.state, now, self.max_pause)
        self.state = step.state
        return step.paused


class LadderOverTime(OverTime):
    """The ladder (:func:`webhook.decision.ladder.step`) with its state: :meth:`share` is
    the share of the pool's cpu limit in force, and the pool counts as paused below its
    whole limit."""

    def __init__(self, *, steps: Sequence[float] = ladder.DEFAULT_STEPS, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.steps = tuple(steps)
        self.ladder = ladder.State()

    def reset(self) -> None:
        """Forget the previous pool's step."""
        self.ladder = ladder.State()

    def share(self, m: PoolMoment) -> float:
        """The share of the pool's limit at ``m`` (call once per simulated hour)."""
        level, series, now = self.inputs(m)
        step = ladder.step(level, series, self.ladder, now, self.max_pause, self.steps)
        self.ladder = step.state
        return step.share

    def __call__(self, m: PoolMoment) -> bool:
        return self.share(m) < 1.0
