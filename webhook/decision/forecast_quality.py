"""How well a forecast ranks the hours of a decision window: the measure that matters for
shifting work in time, where only the order of the hours decides, not their level.

A window is a forecast issued at hour ``t`` for the hours ``t .. t + W`` next to what was
then observed over the same hours. For jobs of ``length`` hours that may wait ``slack``
hours (``W + 1 = slack + length``), its candidates are the ``slack + 1`` starts, each
scored by the mean over the ``length`` hours it would run (the forecast's and the
truth's). Per window:

- ``top``: the share of the window's truly greenest quarter of starts (rounded up) that
  the forecast's greenest quarter also holds;
- ``spearman``: Spearman's rank correlation of forecast and truth over the starts (ties
  take their mean rank; 0 when either side is constant);
- ``saved`` / ``possible``: what starting at the forecast's greenest start saves against
  starting now, and what the truly greenest start saves;
- ``error`` / ``level``: the sum of the forecast's absolute errors over the forecast
  hours (every hour but the observed first) and the sum of the truth over them.

Over many windows (:class:`Tally`, :func:`measure`): ``top`` and ``spearman`` are means,
``captured`` the ratio of sums of the savings (in percent), ``nmae`` the ratio of sums of
the errors to the level (in percent). These are WattTime's three measures of a forecast:
normalised mean absolute error, mean rank correlation of each window (a day, for a 24 h
window), and reduction over potential. The simulator
(:mod:`webhook.simulate.ranking`) judges the past-only forecasts on the traces with it, and
the feed judges a provider's forecasts against the profile's on the hours it kept
(:mod:`webhook.feed.judging`). Pure: data in, figures out.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence

from webhook.decision.forecast import best_start


@dataclasses.dataclass(frozen=True, slots=True)
class Score:
    """One window's figures."""

    top: float
    spearman: float
    saved: float
    possible: float
    error: float = 0.0
    level: float = 0.0


@dataclasses.dataclass(frozen=True, slots=True)
class Quality:
    """A forecast's ranking quality over ``windows`` decision windows."""

    windows: int
    top: float
    """Mean share of the truly greenest quarter of starts the forecast's quarter holds."""
    spearman: float
    """Mean Spearman rank correlation of forecast and truth over each window's starts."""
    captured: float | None
    """Saving of the forecast's greenest start over the truly greenest start's, against
    starting now, in percent (ratio of sums; None when starting now is always best)."""
    nmae: float | None = None
    """Normalised mean absolute error of the forecast hours, in percent of the mean
    truth (ratio of sums; None when nothing was forecast or the truth is all zero)."""


NO_WINDOWS = Quality(0, 0.0, 0.0, None)
"""What :func:`measure` says with nothing to judge."""


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
) -> tuple[float, float, float, float, float, float]:
    """One window's ``top``, ``spearman``, the savings (forecast's start, best start)
    against starting now, and the absolute error and level of the forecast hours;
    ``truth`` and ``forecast`` cover ``slack + length`` hours."""
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
        math.fsum(abs(f - t) for f, t in zip(forecast[1:], truth[1:], strict=True)),
        math.fsum(truth[1:]),
    )


def score(
    forecast: Sequence[float], truth: Sequence[float], *, length: int = 1, slack: int | None = None
) -> Score:
    """:func:`window` of one (forecast, truth) pair as a :class:`Score`; ``slack``
    defaults to every start the pair allows (``len - length``)."""
    if len(forecast) != len(truth):
        raise ValueError("forecast and truth cover different hours")
    if slack is None:
        slack = len(truth) - length
    if length < 1 or slack < 0 or slack + length > len(truth):
        raise ValueError(f"{len(truth)} hours hold no {length} h job with {slack} h slack")
    return Score(*window(truth, forecast, length, slack))


class Tally:
    """Windows' scores added one by one, summed into a :class:`Quality`."""

    def __init__(self) -> None:
        self._tops: list[float] = []
        self._rhos: list[float] = []
        self._got: list[float] = []
        self._best: list[float] = []
        self._errors: list[float] = []
        self._levels: list[float] = []

    def add(self, s: Score) -> None:
        """Count one window."""
        self._tops.append(s.top)
        self._rhos.append(s.spearman)
        self._got.append(s.saved)
        self._best.append(s.possible)
        self._errors.append(s.error)
        self._levels.append(s.level)

    def extend(self, other: Tally) -> None:
        """Count every window ``other`` counted."""
        self._tops += other._tops
        self._rhos += other._rhos
        self._got += other._got
        self._best += other._best
        self._errors += other._errors
        self._levels += other._levels

    def quality(self) -> Quality:
        """The windows added so far, summed up."""
        n = len(self._tops)
        if not n:
            return NO_WINDOWS
        best, level = math.fsum(self._best), math.fsum(self._levels)
        return Quality(
            n,
            math.fsum(self._tops) / n,
            math.fsum(self._rhos) / n,
            100.0 * math.fsum(self._got) / best if best > 0 else None,
            100.0 * math.fsum(self._errors) / level if level > 0 else None,
        )


def summed(scores: Iterable[Score]) -> Quality:
    """The :class:`Quality` of already scored windows."""
    tally = Tally()
    for s in scores:
        tally.add(s)
    return tally.quality()


def measure(
    pairs: Iterable[tuple[Sequence[float], Sequence[float]]],
    *,
    length: int = 1,
    slack: int | None = None,
) -> Quality:
    """Ranking quality over ``pairs``: (forecast issued at hour ``t`` for ``t .. t + W``,
    what was then observed over those hours) each; see :func:`score`."""
    return summed(score(f, t, length=length, slack=slack) for f, t in pairs)


MIN_WINDOWS = 72
"""Windows (three days of hourly issues) a provider's forecasts must be judged on before
they can be preferred to the profile."""
TIE = 0.01
"""Mean Spearman differences up to this are ties (they go to the profile)."""


def prefer_provider(
    profile: Quality, provider: Quality, *, min_windows: int = MIN_WINDOWS, tie: float = TIE
) -> bool:
    """True when a provider's forecasts ranked the hours better than the profile's on the
    same windows: at least ``min_windows`` of them and a mean Spearman higher by more than
    ``tie``. Ties and too little evidence go to the profile (the default forecaster)."""
    return choose("profile", {"profile": profile, "provider": provider}, min_windows, tie) != (
        "profile"
    )


def choose(
    default: str,
    compared: Mapping[str, Quality],
    min_windows: int = MIN_WINDOWS,
    tie: float = TIE,
) -> str:
    """The forecaster of ``compared`` (name -> its measure over the same windows as the
    ``default``'s) that ranked the hours best: the highest mean Spearman among those judged
    on at least ``min_windows`` windows and higher than the default's by more than
    ``tie``; the ``default`` when none is (ties and too little evidence keep it). Equal
    Spearmans go to the first named."""
    base = compared[default]
    best, best_rho = default, base.spearman + tie
    for name, q in compared.items():
        if name == default or q.windows < min_windows or q.windows != base.windows:
            continue
        if q.spearman > best_rho:
            best, best_rho = name, q.spearman
    return best


MIN_ERRORS = 24
"""Past errors an hour ahead needs before :class:`Spread` bounds it (a day of issues)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Spread:
    """Signed errors (forecast - truth) of a forecaster's past forecasts, by hours ahead:
    ``errors[k - 1]`` holds those of the hours forecast ``k`` hours ahead, sorted."""

    errors: tuple[tuple[float, ...], ...] = ()

    @classmethod
    def of(cls, by_horizon: Sequence[Iterable[float]]) -> Spread:
        """From the errors observed ``k`` hours ahead (``by_horizon[k - 1]``), any order."""
        return cls(tuple(tuple(sorted(e)) for e in by_horizon))

    def bound(self, k: int, forecast: float, confidence: float) -> float | None:
        """A value the truth of an hour forecast ``forecast`` ``k`` hours ahead stays under
        with probability ``confidence`` by the past errors (``forecast - q``, ``q`` the
        errors' lower ``1 - confidence`` quantile): None with fewer than
        :data:`MIN_ERRORS` errors that far ahead."""
        if not 0.0 < confidence < 1.0:
            raise ValueError(f"confidence must be in (0, 1), got {confidence}")
        if k < 1 or k > len(self.errors) or len(self.errors[k - 1]) < MIN_ERRORS:
            return None
        errors = self.errors[k - 1]
        return forecast - errors[math.floor((1.0 - confidence) * len(errors) + 1e-9)]


def errors_by_horizon(
    pairs: Iterable[tuple[Sequence[float], Sequence[float]]], horizon: int
) -> list[list[float]]:
    """Signed errors (forecast - truth) ``1 .. horizon`` hours ahead over ``pairs``:
    (outlook ``[now, now+1 h, ...]``, what was then observed over the same hours)."""
    out: list[list[float]] = [[] for _ in range(horizon)]
    for forecast, truth in pairs:
        for k in range(1, min(len(forecast), len(truth), horizon + 1)):
            out[k - 1].append(forecast[k] - truth[k])
    return out
