"""The NodePool ladder over time (strategy ``ladder``): how much of its cpu limit a pool keeps.

Where the pause (:mod:`webhook.decision.pause`) is on or off (``limits.cpu`` the user's
or ``"0"``), the ladder steps: the pool keeps a share of the user's ``spec.limits.cpu``
taken from ``nodepools.ladder`` (default ``[1.0, 0.5, 0.0]``, first step the user's
whole limit, last the smallest share). Which step:

- with a forecast, by the **gap**: how much cleaner the greenest forecast hour within the
  pool's slack is than now, ``1 - min(outlook[1..slack]) / outlook[0]``. No cleaner hour:
  the first step (the whole limit); a cleaner hour: the second step, one more for each
  further entry of :data:`GAPS` the gap reaches (default: any cleaner hour keeps half,
  one 5 % cleaner or more keeps none). Steps ``[1.0, 0.0]`` are exactly the pause;
- without a forecast, by the class: ``low`` the first step, ``high`` the last, ``medium``
  the middle one (with two steps: the first).

The slack is what the pause's is: ``max-pause`` while the pool has its whole limit,
what is left of it once the pool is below (``paused_at``, when it left the first step).
At ``max-pause`` after that the pool gets its whole limit back, whatever the grid, and
keeps it at least :data:`~webhook.decision.pause.RUN_AT_LEAST` (``resumed_at``), as the
pause does; a job waiting since the pool left its whole limit waits at most
``max-pause``. Without intensity data the pool stays on its step until ``max-pause``.

:func:`limit` turns a share into the written ``limits.cpu``: the share of the user's
limit, never below what the pool already uses (``status.resources.cpu``). A pool without
a cpu limit has no share to take: only a step of 0 applies (``limits.cpu: "0"``, as the
pause), other steps leave it unlimited (the caller warns).

Pure: the time, the forecast and the state (the record's ``paused_at``, ``resumed_at``,
``step``) come in as data. The simulator's ladder rows call :func:`step` too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from decimal import ROUND_CEILING, Decimal
from typing import Any

from webhook.decision import pause
from webhook.decision.quantity import quantity
from webhook.model.objects import dig

DEFAULT_STEPS = (1.0, 0.5, 0.0)
"""``nodepools.ladder``: the shares of the user's cpu limit, whole limit first."""
GAPS = (0.0, 0.05)
"""The gap (relative, the greenest forecast hour within the slack against now) each step
after the first needs: more than 0 (any cleaner hour), then 5 % cleaner or more (the
best of 5 / 10 / 20 / 30 % on the batch scenarios, README "Carbon results"). Steps beyond
these need the last gap."""
STEP = "step"
"""Record body key: the share of the user's cpu limit in force."""


@dataclasses.dataclass(frozen=True, slots=True)
class State:
    """What the decision annotation remembers about the ladder."""

    share: float = 1.0
    """The step in force (1.0: the user's whole limit)."""
    times: pause.State = pause.State()
    """``paused_at``: when the pool left its whole limit; ``resumed_at``: when it last got
    it back."""

    @classmethod
    def of(cls, body: Mapping[str, Any]) -> State:
        """Read from a decision record's body; unreadable values count as absent."""
        raw = body.get(STEP)
        share = float(raw) if isinstance(raw, int | float) and 0 <= raw <= 1 else 1.0
        times = pause.State.of(body)
        if times.paused_at is None:
            share = 1.0
        return cls(share, times)

    def body(self) -> dict[str, Any]:
        """The record body's entries for this state."""
        out: dict[str, Any] = dict(self.times.body())
        if self.share < 1.0:
            out[STEP] = self.share
        return out


@dataclasses.dataclass(frozen=True, slots=True)
class Step:
    """The ladder decision at one moment."""

    share: float
    state: State
    why: str
    changed: bool
    """True when the share changes now."""


def gap(series: Sequence[float], slack: int) -> float:
    """How much cleaner (relative) the greenest hour of ``series[1..slack]`` is than
    ``series[0]``; 0 when none is cleaner or ``slack`` < 1."""
    ahead = series[1 : max(slack, 0) + 1]
    if not ahead or series[0] <= 0:
        return 0.0
    return max(0.0, 1.0 - min(ahead) / series[0])


def target(
    level: str | None,
    series: Sequence[float] | None,
    slack: int,
    steps: Sequence[float],
    gaps: Sequence[float] = GAPS,
) -> int:
    """The index in ``steps`` for the grid now (module doc); 0 without data."""
    last = len(steps) - 1
    if series is not None:
        g = gap(series, slack)
        if g <= 0:
            return 0
        return min(last, 1 + sum(1 for t in gaps[1:] if g >= t))
    if level == "high":
        return last
    if level == "medium" and len(steps) > 2:
        return len(steps) // 2
    return 0


def step(  # noqa: PLR0917 - pause.step's arguments and the steps
    level: str | None,
    outlook: Sequence[float] | None,
    state: State,
    now: datetime,
    max_pause: timedelta,
    steps: Sequence[float] = DEFAULT_STEPS,
) -> Step:
    """The pool's share of its cpu limit at ``now``.

    ``level``: the local grid's class now (None: no data). ``outlook``: ``[now, now+1 h,
    ...]`` (None without a forecast); only the hours within the slack are read.
    """
    began = state.times.paused_at
    if began is not None:
        used = max(now - began, timedelta(0))
        if used >= max_pause:
            return _full(state, now, f"max-pause {pause.duration(max_pause)} used up")
        if level is None:
            why = "no intensity data; the whole limit back at max-pause at the latest"
            return Step(state.share, state, why, False)
        slack = (max_pause - used) // pause.HOUR
    else:
        if level is None:
            return Step(1.0, state, "no intensity data", False)
        resumed = state.times.resumed_at
        if resumed is not None and now - resumed < pause.RUN_AT_LEAST:
            return Step(
                1.0, state, f"back less than {pause.duration(pause.RUN_AT_LEAST)} ago", False
            )
        slack = max_pause // pause.HOUR
    share = steps[target(level, outlook, slack, steps)]
    why = _why(level, outlook, slack, max_pause)
    if share >= 1.0:
        if began is None:
            return Step(1.0, state, why, False)
        return _full(state, now, why)
    times = state.times if began is not None else dataclasses.replace(state.times, paused_at=now)
    return Step(share, State(share, times), why, share != state.share)


def _full(state: State, now: datetime, why: str) -> Step:
    return Step(1.0, State(1.0, pause.State(resumed_at=now)), why, state.share < 1.0)


def _why(level: str | None, outlook: Sequence[float] | None, slack: int, limit: timedelta) -> str:
    if outlook is None:
        return f"the grid is {level} (no forecast)"
    g = gap(outlook, slack)
    if g <= 0:
        return "the greenest forecast hour within the slack has come"
    ahead = 1 + min(range(min(slack, len(outlook) - 1)), key=lambda i: outlook[1 + i])
    return f"an hour {g:.0%} cleaner is forecast in {ahead} h (max-pause {pause.duration(limit)})"


# --- the written limit ---------------------------------------------------------------------


def limit(user: object, share: float, used: object) -> str | None:
    """``limits.cpu`` at ``share`` of the user's ``user`` (a quantity), never below
    ``used`` (``status.resources.cpu``); None when there is no usable user limit and the
    share is not 0 (left unlimited)."""
    total = quantity(user)
    floor = quantity(used) or Decimal(0)
    if total is None:
        return None if share > 0 else _cpu(floor)
    return _cpu(max(total * Decimal(str(share)), floor))


def _cpu(value: Decimal) -> str:
    """Whole cores as ``"8"``, else millicores rounded up as ``"1500m"``."""
    if value == value.to_integral_value():
        return str(int(value))
    milli = (value * 1000).to_integral_value(rounding=ROUND_CEILING)
    return f"{int(milli)}m" if milli % 1000 else str(int(milli) // 1000)


def usage(nodepool: Mapping[str, Any]) -> object:
    """What the pool already uses (``status.resources.cpu``), as written; None: unknown."""
    return dig(nodepool, "status", "resources", "cpu")
