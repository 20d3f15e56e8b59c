"""What the leader's re-evaluation decides for one stored object, without any I/O.

The kinds re-evaluated after creation (:func:`targets`), the forecast policies rank on
and NodePool pauses wait with (``reevaluate.forecast``), and the inputs of the pure step
(:func:`webhook.decision.follow.step`). The reconciler
(:class:`webhook.controllers.follower.Follower`) runs it on what it lists from the API
server; ``carbonshift mutate --reevaluate`` runs it on manifests, so the preview shows
the decisions the reconciler makes for the same inputs.

With a forecast, policies are ranked as the simulator's forecast rows rank them: each
member zone at the mean of its outlook over the next
:data:`~webhook.decision.forecast.RANK_HOURS` hours (a zone without enough history keeps
its current reading); the decision record's ``provider`` names the forecast. NodePools
follow the local grid (config ``zone``) with the outlook over the pool's ``max-pause``
(at most a day ahead).

A kind is followed when its registry row has a :class:`~webhook.kinds.base.Following`
(its step, owned-field paths, local decider and Events); :func:`targets` reads them from
the registry.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Literal

from webhook import kinds
from webhook.decision import follow, pause
from webhook.decision.forecast import HOURS_PER_DAY, RANK_HOURS, Method, on_forecast
from webhook.decision.forecast_quality import Spread
from webhook.decision.outcome import Decision
from webhook.kinds import Context, Following, Kind
from webhook.model.config import Config
from webhook.model.intensity import IntensityTable
from webhook.model.objects import meta_of
from webhook.model.vocabulary import Scope, knobs

OutlookMethod = Method | Literal["provider", "best"] | None
Outlook = Callable[[str, int, OutlookMethod], Sequence[float] | None]
"""``IntensityFeed.outlook(zone, horizon_hours, method)``."""
SpreadOf = Callable[[str, int, OutlookMethod], Spread | None]
"""``IntensityFeed.spread(zone, horizon_hours, method)``: the outlook's past errors."""
METHODS: Mapping[str, OutlookMethod] = {
    "none": None,
    "day-ahead-profile": Method.PROFILE,
    "provider": "provider",
    "best": "best",
}
"""``reevaluate.forecast`` -> the feed's outlook method."""


class ZonesRead(Mapping[str, Any]):
    """An intensity table that notes each zone a decision looks up in it (iterating it
    notes every zone): what :meth:`Reevaluation.decide` reports as the zones a decision
    read, so the leader decides an object again only when one of them changed."""

    __slots__ = ("_seen", "_table")

    def __init__(self, table: Mapping[str, Any], seen: set[str]) -> None:
        self._table, self._seen = table, seen

    def __getitem__(self, zone: str) -> Any:
        self._seen.add(zone)
        return self._table[zone]

    def get(self, zone: str, default: Any = None) -> Any:
        """``self[zone]``, or ``default`` (the zone is noted either way): what a decision
        asks of every candidate's zone, answered without the ABC's ``KeyError`` round."""
        self._seen.add(zone)
        return self._table.get(zone, default)

    def __contains__(self, zone: object) -> bool:
        if isinstance(zone, str):
            self._seen.add(zone)
        return zone in self._table

    def __iter__(self) -> Iterator[str]:
        self._seen.update(self._table)
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)


def replayed(method: OutlookMethod) -> Method:
    """The forecast a replay of observed hours runs for ``method`` (the simulator's): a
    replay holds no provider forecast, so ``best`` never has the evidence to leave the
    day-ahead profile, and ``provider`` and ``none`` are replayed on the profile too."""
    return method if isinstance(method, Method) else Method.PROFILE


@dataclasses.dataclass(frozen=True, slots=True)
class Target:
    """One kind the leader re-evaluates: its registry row and how it is followed."""

    row: Kind

    @property
    def following(self) -> Following:
        """The row's :class:`~webhook.kinds.base.Following` (set for every target)."""
        following = self.row.following
        if following is None:  # pragma: no cover - targets are built from followed rows
            raise LookupError(f"{self.row.kind} is not followed")
        return following

    @property
    def local(self) -> bool:
        """Decided on the local grid over time, with the feed's outlook."""
        return self.following.local is not None


def targets(registry: kinds.Registry | None = None) -> tuple[Target, ...]:
    """Every kind the registry says the leader follows (default: :data:`kinds.REGISTRY`)."""
    return tuple(Target(row) for row in (registry or kinds.REGISTRY).followed())


def target_of(api_version: str, kind: str, registry: kinds.Registry | None = None) -> Target | None:
    """The target for an object's ``apiVersion`` and ``kind`` (None: not re-evaluated)."""
    group, _, version = api_version.rpartition("/")
    row = (registry or kinds.REGISTRY).find(group, kind)
    if row is None or row.version != version or row.following is None:
        return None
    return Target(row)


class Reevaluation:
    """The re-evaluation's rules under one config, with the feed's outlook (if any)."""

    def __init__(
        self, config: Config, outlook: Outlook | None = None, spread: SpreadOf | None = None
    ) -> None:
        """``outlook``: the feed's (:meth:`IntensityFeed.outlook`); without it, everything
        is decided on current intensity. ``spread``: the outlook's past errors
        (:meth:`IntensityFeed.spread`), read with ``nodepools.pause_confidence``."""
        self.config = config
        self.outlook = outlook
        self.spread = spread
        self.method = METHODS[config.reevaluate.forecast]
        self.hysteresis = config.hysteresis
        self._ranked_for: tuple[tuple[int | None, int] | None, IntensityTable] = (None, {})
        self._ranked_last: tuple[Context, Context] | None = None
        """The last context ranked and its view (a pass ranks one context per object)."""

    def ranked(self, ctx: Context) -> Context:
        """``ctx`` with its members' zones read as their forecast means
        (:func:`webhook.decision.forecast.on_forecast`, the simulator's forecast view);
        ``ctx`` itself without a forecast method. One view per table and fleet; a
        context that carries its ranking (``Context.ranked``: the world's, computed once
        per snapshot and fleet) is read as it is."""
        method, outlook = self.method, self.outlook
        if method is None or outlook is None:
            return ctx
        if ctx.ranked is not None:
            last = self._ranked_last
            if last is not None and last[0] is ctx:
                return last[1]
            view = dataclasses.replace(ctx, table=ctx.ranked, generation=None)
            self._ranked_last = (ctx, view)
            return view
        key = (ctx.generation, ctx.fleet_generation)
        if ctx.generation is not None and self._ranked_for[0] == key:
            last = self._ranked_last
            if last is not None and last[0] is ctx:  # frozen: the same view of it
                return last[1]
            view = dataclasses.replace(ctx, table=self._ranked_for[1], generation=None)
            self._ranked_last = (ctx, view)
            return view
        zones = sorted({z for c in ctx.clusters.values() if (z := c.grid_zone)})
        table = self.ranked_zones(ctx.table, zones)
        self._ranked_for, self._ranked_last = (key, table), None
        return dataclasses.replace(ctx, table=table, generation=None)

    def ranked_zones(self, table: IntensityTable, zones: Sequence[str]) -> IntensityTable:
        """``table`` with ``zones`` read as their forecast means, as :meth:`ranked` reads
        the members' zones; ``table`` itself without a forecast method."""
        method, outlook = self.method, self.outlook
        if method is None or outlook is None:
            return table
        basis = f"{self.config.reevaluate.forecast} {RANK_HOURS} h mean"
        return on_forecast(table, zones, lambda z: outlook(z, RANK_HOURS - 1, method), basis)

    def local_outlook(
        self, obj: Mapping[str, Any], zone: str | None = None, scope: Scope = "nodepool"
    ) -> Sequence[float] | None:
        """The feed's ``[now, now+1 h, ...]`` for the local zone (default: config ``zone``)
        over the object's slack, its ``max-pause`` (at most a day ahead); None without a
        zone, a method or enough data. With ``nodepools.pause_confidence``, each forecast
        hour is read at the value its truth stays under with that probability by the
        forecast's past errors (:func:`webhook.decision.pause.surely`), when the feed
        holds them: what waits, waits only for an hour surely greener."""
        zone = zone or self.config.zone
        if zone is None or self.method is None or self.outlook is None:
            return None
        slack = knobs(meta_of(obj).annotations, scope).max_pause.total_seconds() / 3600
        horizon = max(1, min(HOURS_PER_DAY, math.ceil(slack)))
        series = self.outlook(zone, horizon, self.method)
        confidence = self.config.nodepools.pause_confidence
        if not series or confidence is None or self.spread is None:
            return series
        spread = self.spread(zone, horizon, self.method)
        return series if spread is None else pause.surely(series, spread, confidence)

    def decide(
        self,
        target: Target,
        obj: Mapping[str, Any],
        ctx: Context,
        namespace_labels: Mapping[str, str] | None,
        reads: set[str] | None = None,
    ) -> follow.Action:
        """The step's action for ``obj`` (``namespace_labels``: its namespace's labels,
        None for cluster-scoped kinds). ``reads``, when given, gains every zone whose
        reading or forecast the decision looked at (:class:`ZonesRead`)."""
        row, following = target.row, target.following
        local = following.local
        if local is None:
            ctx = self.ranked(ctx)
        zone = ctx.local_zone if local is not None else None
        if reads is not None:
            ranked = None if ctx.ranked is None else ZonesRead(ctx.ranked, reads)
            ctx = dataclasses.replace(ctx, table=ZonesRead(ctx.table, reads), ranked=ranked)
            if zone is not None:
                reads.add(zone)  # its outlook
        outlook = self.local_outlook(obj, zone, row.scope) if local is not None else None
        decide_on = None
        if local is not None:
            local_decider = local

            def decide_on(o: Mapping[str, Any], table: IntensityTable) -> Decision:
                return local_decider(o, table, ctx, outlook)

        inputs = follow.Inputs(
            decide=lambda o: row.decide(o, ctx),
            table=ctx.table,
            clusters=following.places(ctx),
            now=ctx.now,
            hysteresis=self.hysteresis,
            min_interval_seconds=self.config.reevaluate.min_interval_seconds,
            namespace_labels=namespace_labels if row.namespaced else None,
            fields=following.fields,
            zone=zone,
            decide_on=decide_on,
            outlook=outlook,
        )
        return follow.step(obj, inputs, following.rules)
