"""The batch (temporal) policies a simulation compares.

They decide, hour by hour, whether a zone's NodePool is paused (limits cpu 0: no new
nodes, pending jobs wait). carbonshift's run the product: the pool is admitted by the
NodePool decider and re-evaluated by the leader's NodePool step
(:mod:`webhook.simulate.pausing`); the class-based one pauses by
:func:`webhook.decision.karpenter.nodepool.pauses`, the webhook's rule.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable, Sequence

from webhook.decision import pause
from webhook.decision.forecast import Method, history_needed, offered, outlook
from webhook.decision.forecast_quality import Score, Spread, choose, score, summed
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
        series = outlook(method, history, horizon, days=days, at=m.hour)
        return pause.waits(series, m.length, m.urgency)  # the NodePool pause rule

    return paused


JUDGE_HOURS = 7 * 24
"""Hours of past forecasts :class:`Tracked` judges and measures the errors of (the feed
judges its last 7 days, :data:`webhook.feed.history.JUDGE_DAYS`)."""
WINDOW = 24
"""Hours ahead of the windows :class:`Tracked` judges the forecasters on (the feed's
``WINDOW_HOURS``)."""
ERROR_HOURS = 48
"""Hours ahead :class:`Tracked` measures the errors of."""


class Tracked:
    """The forecast pause with a memory of the forecasts it issued for the pool: each
    hour it forecasts with every one of ``methods``, judges them on the windows of the
    last :data:`JUDGE_HOURS` hours whose :data:`WINDOW` hours have all been observed
    (:func:`webhook.decision.forecast_quality.choose`, the first method the default), and
    pauses on the chosen one's forecast, with ``confidence`` by its past errors by hours
    ahead (:func:`webhook.decision.pause.waits`). Call once per hour, in order; one pool
    at a time (:meth:`reset`)."""

    def __init__(
        self, methods: Sequence[Method], days: int, *, confidence: float | None = None
    ) -> None:
        if not methods:
            raise ValueError("no forecaster to track")
        self.methods = tuple(methods)
        self.days = days
        self.confidence = confidence
        self.chosen: dict[Method, int] = {}
        """How many hours each method was chosen in (over every pool)."""
        self.reset()

    def reset(self) -> None:
        """Forget the previous pool's forecasts."""
        self._issued: dict[Method, dict[int, list[float]]] = {m: {} for m in self.methods}
        self._scores: dict[Method, deque[Score]] = {
            m: deque(maxlen=JUDGE_HOURS) for m in self.methods
        }
        self._errors: dict[Method, list[deque[float]]] = {
            m: [deque(maxlen=JUDGE_HOURS) for _ in range(ERROR_HOURS)] for m in self.methods
        }

    def _learn(self, method: Method, m: PoolMoment) -> None:
        """Count what the hour just observed says of the method's past forecasts."""
        issued, errors, t = self._issued[method], self._errors[method], m.hour
        for k in range(1, ERROR_HOURS + 1):
            past = issued.get(t - k)
            if past is not None and k < len(past):
                errors[k - 1].append(past[k] - m.value)
        judged = issued.get(t - WINDOW)
        if judged is not None and len(judged) > WINDOW:
            truth = m.history(WINDOW + 1)
            if len(truth) == WINDOW + 1:
                self._scores[method].append(score(judged[: WINDOW + 1], truth))
        for old in [s for s in issued if s <= t - ERROR_HOURS]:
            del issued[old]

    def __call__(self, m: PoolMoment) -> bool:
        horizon = m.urgency + m.length - 1
        ahead = max(horizon, WINDOW, ERROR_HOURS)
        for method in self.methods:
            self._learn(method, m)
            history = m.history(history_needed(method, ahead, days=self.days))
            self._issued[method][m.hour] = outlook(
                method, history, ahead, days=self.days, at=m.hour
            )
        name = choose(
            self.methods[0].value,
            {method.value: summed(self._scores[method]) for method in self.methods},
        )
        method = Method(name)
        self.chosen[method] = self.chosen.get(method, 0) + 1
        spread = Spread.of(self._errors[method]) if self.confidence is not None else None
        series = self._issued[method][m.hour][: horizon + 1]
        return pause.waits(series, m.length, m.urgency, spread=spread, confidence=self.confidence)


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
        *tracked_policies(compare),
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


def tracked_policies(compare: Compare) -> list[PausePolicy]:
    """``pause-forecast`` on the seasonal forecaster, on the one of the two the judge
    picks per zone, and holding only for surely greener starts (:class:`Tracked`); the
    seasonal rows only where its library is installed."""
    s = compare
    days, confidence = s.forecast_days, s.confidence
    rows = []
    if Method.SEASONAL in offered() and s.forecast is not Method.SEASONAL:
        rows += [
            PausePolicy(
                "pause-forecast-seasonal",
                "pause until the seasonal forecast's greenest start, deadline guard",
                pause_by_forecast(Method.SEASONAL, days),
                info=f"{Method.SEASONAL.value} forecast",
            ),
            PausePolicy(
                "pause-forecast-judged",
                f"pause until the greenest start of the forecast ({s.forecast.value} or"
                " seasonal) that ranked the zone's last 7 days better, deadline guard",
                Tracked((s.forecast, Method.SEASONAL), days),
                info=f"judged {s.forecast.value} / {Method.SEASONAL.value} forecast",
            ),
        ]
    return [
        *rows,
        PausePolicy(
            "pause-forecast-sure",
            f"pause until a start greener than now with probability >= {confidence:g} by"
            " the forecast's past errors, deadline guard",
            Tracked((s.forecast,), days, confidence=confidence),
            info=s.forecast_info,
        ),
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
