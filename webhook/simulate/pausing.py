"""The NodePool pause and ladder as the product runs them, over one pool's hours.

A simulated pool is a Karpenter NodePool (``carbonshift.io/strategy: pause`` or
``ladder``) in the scenario's zone. It is admitted by the kind's decider (what the webhook
writes on CREATE) and then re-evaluated every hour by the leader's step
(:class:`webhook.kinds.reevaluation.Reevaluation`,
:func:`webhook.decision.karpenter.nodepool_step.step`,
:func:`webhook.decision.karpenter.nodepool.reevaluate`, :func:`webhook.decision.pause.step` /
:func:`webhook.decision.karpenter.ladder.step`), its state kept where the product keeps it: in the
pool's decision annotation. The pool's ``limits.cpu`` in force is the share of the work it
starts. The forecast is the leader's feed's outlook, on the method a replay runs (a
scenario's ``compare.forecast``), computed from the hours seen so far. The webhook knows
nothing of the jobs' deadlines: ``max-pause`` is the only limit. One instance serves one
NodePool at a time; the engine calls :meth:`OverTime.reset` before each pool.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import msgspec

from webhook import kinds, testing
from webhook.decision import pause
from webhook.decision.forecast import DAYS, Method, history_needed, outlook
from webhook.decision.quantity import quantity
from webhook.decision.record import Record
from webhook.kinds.reevaluation import OutlookMethod, Reevaluation, Target, target_of
from webhook.model.config import Config
from webhook.model.intensity import Reading, Signal
from webhook.model.objects import dig
from webhook.model.vocabulary import DECISION, MAX_PAUSE
from webhook.simulate.product import admitted, at_hour

if TYPE_CHECKING:
    from webhook.simulate.batch import PoolMoment

ZONE = "LOCAL"
"""The pool's grid zone as the simulated config names it."""
LIMIT = Decimal(1000)
"""The user's ``limits.cpu``: a share of it is the share of the work started."""


def nodepool(strategy: str, max_pause: timedelta) -> dict[str, Any]:
    """The NodePool a pause policy stands for."""
    return testing.nodepool(
        "batch",
        requirements=[],
        node_class={"name": "default"},
        limits={"cpu": str(LIMIT)},
        enabled=True,
        annotations={MAX_PAUSE: pause.duration(max_pause)},
        strategy=strategy,
    )


class OverTime:
    """A pause decision for :class:`~webhook.simulate.batch.PausePolicy`, run by the
    product: strategy ``pause`` (``limits.cpu: "0"`` or the user's)."""

    strategy = "pause"

    def __init__(
        self,
        *,
        max_pause: timedelta,
        forecast: Method | None = None,
        days: int = DAYS,
        base: Config | None = None,
    ) -> None:
        """The pool under ``base`` (default: the product's defaults): its ``nodepools``
        class thresholds and ladder; ``forecast`` (None: none) over ``days`` of history."""
        base = base or Config()
        named = "day-ahead-profile" if forecast is not None else "none"
        self.config = msgspec.structs.replace(
            base,
            zone=ZONE,
            reevaluate=msgspec.structs.replace(base.reevaluate, forecast=named),
        )
        self.max_pause = max_pause
        self.forecast = forecast
        self.days = days
        self.steps = tuple(base.nodepools.ladder)
        target = target_of("karpenter.sh/v1", "NodePool")
        if target is None:  # pragma: no cover - NodePools are re-evaluated
            raise LookupError("NodePools are not re-evaluated")
        self.target: Target = target
        self.leader = Reevaluation(self.config, self._outlook)
        self.leader.method = forecast  # the scenario's method, named or not in the config
        self.stored: Mapping[str, Any] | None = None
        self._moment: PoolMoment | None = None

    def reset(self) -> None:
        """Forget the previous pool."""
        self.stored = None

    @property
    def state(self) -> pause.State:
        """The pause state the pool's decision annotation holds."""
        if self.stored is None:
            return pause.State()
        annotations = self.stored["metadata"]["annotations"]
        return pause.State.of(Record.decode(annotations.get(DECISION)).body)

    def _outlook(self, zone: str, horizon: int, method: OutlookMethod) -> Sequence[float] | None:
        """The leader's feed: ``[now, now+1 h, ...]`` from the hours seen so far."""
        m = self._moment
        if m is None or not isinstance(method, Method):
            return None
        history = m.history(history_needed(method, horizon, days=self.days))
        return outlook(method, history, horizon, days=self.days, at=m.hour)

    def share(self, m: PoolMoment) -> float:
        """The share of the pool's limit in force at ``m`` (call once per simulated hour)."""
        self._moment = m
        now = at_hour(m.hour)
        reading = Reading(
            ZONE, m.value, Signal.AVERAGE, now, now + timedelta(hours=1), False, "simulation"
        )
        ctx = kinds.Context(self.config, {ZONE: reading}, now)
        if self.stored is None:
            self.stored = admitted(self.target, nodepool(self.strategy, self.max_pause), ctx)
        else:
            action = self.leader.decide(self.target, self.stored, ctx, None)
            if action.changes:
                self.stored = action.applied(self.stored)
        cpu = quantity(dig(self.stored, "spec", "limits", "cpu"))
        return 1.0 if cpu is None else float(min(Decimal(1), cpu / LIMIT))

    def __call__(self, m: PoolMoment) -> bool:
        return self.share(m) < 1.0


class LadderOverTime(OverTime):
    """The ladder (strategy ``ladder``): ``limits.cpu`` a share of the user's, by
    :func:`webhook.decision.karpenter.ladder.step` through the config's
    ``nodepools.ladder``; the pool counts as paused below its whole limit."""

    strategy = "ladder"
