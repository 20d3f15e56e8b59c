"""The batch (temporal) policies a simulation compares.

They decide, hour by hour, whether a zone's NodePool is paused (limits cpu 0: no new
nodes, pending jobs wait). carbonshift's run the product: the pool is admitted by the
NodePool decider and re-evaluated by the leader's NodePool step
(:mod:`webhook.simulate.pausing`); the class-based one pauses by
:func:`webhook.decision.karpenter.nodepool.pauses`, the webhook's rule.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from webhook.decision import pause
from webhook.decision.forecast import Method, history_needed, outlook
from webhook.decision.karpenter import nodepool
from webhook.decision.ranking import intensity_class
from webhook.model.config import Config
from webhook.model.vocabulary import DEFAULT_MAX_PAUSE
from webhook.simulate.pausing import LadderOverTime, OverTime
from webhook.simulate.scenario import Compare

DEFAULT_TEMPORAL = "pause-over-time-forecast"
"""The temporal row carbonshift's default behaviour stands for: the NodePool pause the
webhook runs with its default config (strategy ``pause``, :func:`webhook.decision.pause.step`
on the day-ahead profile, ``max-pause`` 24 h). It knows nothing of pending jobs'
deadlines."""


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
Share = Callable[[PoolMoment], float]
"""The share of the pool's cpu limit in force (1.0: the whole limit, 0.0: paused)."""


def pause_never(_: PoolMoment) -> bool:
    """Run on arrival."""
    return False


def pause_by_class(low_below: float, high_from: float) -> Pause:
    """Paused while the webhook's NodePool rule (:func:`nodepool.pauses`) pauses."""

    def paused(m: PoolMoment) -> bool:
        return nodepool.pauses(intensity_class(m.value, low_below=low_below, high_from=high_from))

    return paused


def pause_by_forecast(method: Method, days: int) -> Pause:
    """Paused while the forecast shows a greener start before the most urgent deadline."""

    def paused(m: PoolMoment) -> bool:
        horizon = m.urgency + m.length - 1
        history = m.history(history_needed(method, horizon, days=days))
        series = outlook(method, history, horizon, days=days)
        return pause.waits(series, m.length, m.urgency)  # the NodePool pause rule

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
    share: Share | None = None
    """A ladder: the share of the limit in force (None: all or nothing, by :attr:`paused`)."""

    def share_at(self, m: PoolMoment) -> float:
        """The share of the pool's limit in force at ``m`` (call once per hour)."""
        if self.share is not None:
            return self.share(m)
        return 0.0 if self.paused(m) else 1.0


def batch_policies(config: Config, compare: Compare) -> list[PausePolicy]:
    """The temporal line-up: baseline first. carbonshift's rows run under ``config`` (a
    scenario's ``policy``: its ``nodepools`` thresholds and ladder), the forecast rows on
    ``compare``'s forecast."""
    s, pools = compare, config.nodepools
    ahead = s.forecast_info
    by_class = pause_by_class(pools.low_below, pools.high_from)
    return [
        PausePolicy("run-now", "carbon-agnostic: run on arrival", pause_never, info="none"),
        PausePolicy(
            "pause-class",
            f"pause while class is high (>= {pools.high_from:g}), no deadline guard",
            by_class,
            deadline_guard=False,
        ),
        PausePolicy("pause-class-deadline", "pause while class is high, deadline guard", by_class),
        PausePolicy(
            "pause-forecast",
            "pause until the forecast's greenest start, deadline guard",
            pause_by_forecast(s.forecast, s.forecast_days),
            info=ahead,
        ),
        PausePolicy(
            "pause-over-time",
            f"the webhook's pause: while high, resumed at max-pause"
            f" ({DEFAULT_MAX_PAUSE.total_seconds() / 3600:g} h), no forecast",
            OverTime(max_pause=DEFAULT_MAX_PAUSE, base=config),
            deadline_guard=False,
        ),
        PausePolicy(
            "pause-over-time-forecast",
            "the webhook's pause: while high and a cleaner hour is forecast within"
            " max-pause, resumed at that hour or at max-pause",
            OverTime(
                max_pause=DEFAULT_MAX_PAUSE,
                forecast=s.forecast,
                days=s.forecast_days,
                base=config,
            ),
            deadline_guard=False,
            info=ahead,
        ),
        *ladder_policies(config, compare),
    ]


def ladder_policies(config: Config, compare: Compare) -> list[PausePolicy]:
    """The webhook's ladder (strategy ``ladder``, ``nodepools.ladder`` of ``config``) on
    the class alone and on ``compare``'s forecast."""
    s = compare
    steps = "/".join(f"{x:.0%}" for x in config.nodepools.ladder)
    plain = LadderOverTime(max_pause=DEFAULT_MAX_PAUSE, base=config)
    ahead = LadderOverTime(
        max_pause=DEFAULT_MAX_PAUSE, forecast=s.forecast, days=s.forecast_days, base=config
    )
    return [
        PausePolicy(
            "ladder-over-time",
            f"the webhook's ladder: limits {steps} by class, whole at max-pause, no forecast",
            plain,
            deadline_guard=False,
            share=plain.share,
        ),
        PausePolicy(
            "ladder-over-time-forecast",
            f"the webhook's ladder: limits {steps} by the forecast's cleaner hour within"
            " max-pause, whole at that hour or at max-pause",
            ahead,
            deadline_guard=False,
            info=s.forecast_info,
            share=ahead.share,
        ),
    ]
