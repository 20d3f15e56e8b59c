"""The spatial policies a simulation compares; carbonshift's own run the product's code.

Spatial policies say, for one workload (one PropagationPolicy), where its replicas
should go, as an *intent*: a static weight list (:class:`Weights`), ordered affinity
terms (:class:`Terms`) or an ordered fill (:class:`Fill`). The engine then divides
replicas the way Karmada does.

carbonshift's policies (:class:`WebhookProposal`) do not model the product, they run it.
Each stands for a PropagationPolicy and a :class:`~webhook.model.config.Config` (the
scenario's ``policy:``: the product's defaults with its keys over them). At creation the
policy goes with the hour's intensities to the kind's decider, the one admission calls
(:data:`webhook.kinds.KINDS`, :func:`webhook.decision.karmada.placement.decide`), and the
simulator stores what the webhook stores: the placement written and the
``carbonshift.io/decision`` annotation. Every re-evaluation then runs the leader's step
on that stored object (:class:`webhook.kinds.reevaluation.Reevaluation`,
:func:`webhook.decision.follow.step`: hysteresis, dwell, ``min_interval_seconds``),
and the placement it keeps or writes is read back as Karmada reads it
(:meth:`Members.intent`). The move-back of an ordered fill is the leader's
(:func:`webhook.decision.karmada.capacity.plan_move`, ``rebalance:``). The greedy top-N operator
and the even baseline stand for other products (or none) and are modelled directly.

Batch (temporal) policies are in :mod:`webhook.simulate.batch`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

import msgspec
import orjson

from webhook import kinds, testing
from webhook.decision.forecast import Method
from webhook.decision.karmada.api import KarmadaApi, configured
from webhook.decision.karmada.capacity import MoveRule
from webhook.decision.karmada.division import static_weights
from webhook.decision.karmada.view import PlacementView
from webhook.decision.ranking import order_greenest
from webhook.decision.selectors import allowed_clusters
from webhook.kinds.reevaluation import Reevaluation, Target, target_of
from webhook.model.config import ClusterConfig, Config, KarmadaConfig
from webhook.model.intensity import Reading, Signal
from webhook.model.objects import items
from webhook.model.vocabulary import (
    ENABLED,
    MAX_CLUSTERS,
    MAX_INTENSITY,
    STRATEGY,
)
from webhook.simulate.product import admitted, at_hour
from webhook.simulate.scenario import Compare

# --- spatial -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Weights:
    """Intent: a ``staticWeightList`` over one set of candidates (absent or 0: no replicas)."""

    weights: tuple[tuple[str, int], ...]

    def as_weights(self) -> dict[str, int]:
        """Weight per cluster."""
        return dict(self.weights)


@dataclasses.dataclass(frozen=True, slots=True)
class Terms:
    """Intent: ``clusterAffinities`` tried in order, each term the clusters it allows."""

    terms: tuple[tuple[str, ...], ...]
    """Each term's clusters, in the order written."""
    weights: tuple[tuple[str, int], ...] = ()
    """Static weights inside the chosen term; empty: divided by available replicas."""


@dataclasses.dataclass(frozen=True, slots=True)
class Fill:
    """Intent: an ordered fill, tiers filled one after another by Karmada by room
    (``overflowAffinities``, v1.18), or failover groups tried in order (before v1.18)."""

    tiers: tuple[tuple[str, ...], ...]
    """Each tier's clusters, greenest tier first."""
    groups: bool = False
    """Written as failover groups: term *k* holds tiers 0 to *k*
    (:func:`webhook.decision.karmada.capacity.group_fill`)."""


Intent = Weights | Terms | Fill
Propose = Callable[[Mapping[str, float]], Intent]
"""Turns intensities per cluster into an intent."""


def _weights(values: Mapping[str, int]) -> Weights:
    return Weights(tuple(sorted(values.items())))


def propose_even(intensities: Mapping[str, float]) -> Intent:
    """Every cluster weight 1 (carbon-agnostic)."""
    return _weights(dict.fromkeys(intensities, 1))


def propose_top_n(n: int) -> Propose:
    """The ``n`` greenest clusters, weight 1 each (the greedy operator's clusterNames)."""

    def propose(intensities: Mapping[str, float]) -> Intent:
        return _weights(dict.fromkeys(order_greenest(intensities)[:n], 1))

    return propose


REPLAYED = KarmadaApi(True, "config", "1.18")
"""The Karmada API a replay writes for under ``karmada.version: auto``: v1.18, whose
``overflowAffinities`` tier fill the engine replays."""

GROUPS_RELEASE = "1.16"
"""The release the failover-groups rows name (``overflowAffinities`` came in 1.18)."""


def replayed_api(config: Config) -> KarmadaApi:
    """The Karmada API carbonshift's rows write for: the release ``karmada.version``
    names, else :data:`REPLAYED`."""
    return configured(config.karmada.version) or REPLAYED


NAMESPACE_LABELS = {ENABLED: "true"}
"""The simulated policies' namespace: opted in."""


def policy_object(
    clusters: Sequence[str],
    *,
    max_clusters: int | None = None,
    max_intensity: float | None = None,
    available: bool = False,
    strategy: str | None = None,
) -> dict[str, Any]:
    """The PropagationPolicy a carbonshift policy stands for.

    Divided over ``clusters`` (``clusterAffinity.clusterNames``), so the webhook writes
    its default (the ordered fill) or ``strategy``; ``available`` instead has Karmada
    divide by available replicas (``dynamicWeight: AvailableReplicas``, ``strategy:
    none``), as ``examples/30-...`` does.
    """
    annotations: dict[str, str] = {STRATEGY: strategy} if strategy else {}
    if max_clusters is not None:
        annotations[MAX_CLUSTERS] = str(max_clusters)
    if max_intensity is not None:
        annotations[MAX_INTENSITY] = repr(float(max_intensity))
    scheduling: dict[str, Any] = {"replicaSchedulingType": "Divided"}
    if available:
        annotations[STRATEGY] = "none"
        scheduling["replicaDivisionPreference"] = "Weighted"
        scheduling["weightPreference"] = {"dynamicWeight": "AvailableReplicas"}
    return testing.propagation_policy(
        "workload",
        namespace="simulation",
        annotations=annotations,
        selectors=[{"apiVersion": "apps/v1", "kind": "Deployment"}],
        placement={"replicaScheduling": scheduling},
        clusters=clusters,
    )


_MEMO = 4096

Key = tuple[tuple[str, float], ...]


def _remember(memo: dict[Any, Any], key: Any, value: Any) -> None:
    if len(memo) >= _MEMO:
        memo.clear()
    memo[key] = value


class Members:
    """The scenario's member clusters as the webhook's config knows them.

    Also reads a written placement back as Karmada does (:meth:`intent`). Memoises what
    repeats across policies: the intensity table of an hour's view, affinity matches.
    """

    def __init__(self, clusters: Mapping[str, ClusterConfig]) -> None:
        self.clusters = clusters
        self._tables: dict[tuple[int, Key], dict[str, Reading]] = {}
        self._matches: dict[bytes, list[str]] = {}

    def table(self, key: Key, hour: int = 0) -> dict[str, Reading]:
        """Readings of each cluster's grid zone in ``hour`` (a forecast below zero reads as 0)."""
        table = self._tables.get((hour, key))
        if table is None:
            table = {}
            start = at_hour(hour)
            for name, value in key:
                zone = self.clusters[name].grid_zone or name
                table[zone] = Reading(
                    zone,
                    max(0.0, value),
                    Signal.AVERAGE,
                    start,
                    start + timedelta(hours=1),
                    False,
                    "simulation",
                )
            _remember(self._tables, (hour, key), table)
        return table

    def allowed(self, affinity: Mapping[str, Any] | None) -> list[str]:
        """The clusters an affinity allows (Karmada's matching), in its ``clusterNames`` order."""
        key = orjson.dumps(affinity)  # the webhook writes keys in a fixed order
        names = self._matches.get(key)
        if names is None:
            names = allowed_clusters(affinity, self.clusters)
            named = items(affinity, "clusterNames")
            if named:
                keep = set(names)
                names = [n for n in named if n in keep]
            _remember(self._matches, key, names)
        return names

    def intent(self, written: Mapping[str, Any]) -> Intent:
        """How Karmada reads a placement: candidates per affinity term, static weights or not."""
        view = PlacementView.of(written)
        static = static_weights(view, self.allowed)
        if view.terms and view.fill_tiers is not None:
            if view.fill_shape == "groups":
                seen: set[str] = set()
                grouped = []
                for term in view.terms:
                    tier = tuple(n for n in self.allowed(term.affinity) if n not in seen)
                    seen.update(tier)
                    grouped.append(tier)
                return Fill(tuple(grouped), groups=True)
            first = view.terms[0]
            tiers = [first.affinity, *(first.overflow or ())]
            return Fill(tuple(tuple(self.allowed(t)) for t in tiers))
        if not view.terms:
            group = self.allowed(view.affinity)
            if static is not None:
                # Karmada: clusters without a matching rule take no replicas; none: even.
                weighted = {n: static[n] for n in group if static.get(n, 0) > 0}
                return _weights(weighted or dict.fromkeys(group, 1))
            affinities = [view.affinity]
        else:
            affinities = [t.affinity for t in view.terms]
        return Terms(
            tuple(tuple(self.allowed(t)) for t in affinities),
            tuple(sorted(static.items())) if static is not None else (),
        )


@dataclasses.dataclass(frozen=True, slots=True)
class Held:
    """A workload's placement in force: the intent, and for carbonshift's policies the
    stored PropagationPolicy behind it (placement and decision annotation)."""

    intent: Intent
    stored: Mapping[str, Any] | None = None


class WebhookProposal:
    """A carbonshift policy: a PropagationPolicy decided by the product's code under ``config``.

    :meth:`create` is admission (the kind's decider), :meth:`reevaluate` the leader's
    re-evaluation step on the stored object. Admissions are memoised on the hour and
    its intensities: policies sharing one proposal (and one hour's view) decide once.
    """

    def __init__(self, obj: Mapping[str, Any], members: Members, config: Config) -> None:
        self.obj = obj
        self.members = members
        self.config = msgspec.structs.replace(config, clusters=members.clusters)
        target = target_of(obj["apiVersion"], obj["kind"])
        if target is None:  # pragma: no cover - policy_object writes a re-evaluated kind
            raise LookupError(f"{obj['kind']} is not re-evaluated")
        self.target: Target = target
        self.leader = Reevaluation(self.config)  # ranks on the view it is given
        self.api = replayed_api(config)
        self._memo: dict[tuple[int, Key], Held] = {}
        self._revisits: dict[tuple[int, int, Key], tuple[Mapping[str, Any], Held | None]] = {}

    def context(self, intensities: Mapping[str, float], hour: int) -> kinds.Context:
        """The decision context of ``hour``: the config and the hour's readings."""
        table = self.members.table(tuple(intensities.items()), hour)
        return kinds.Context(self.config, table, at_hour(hour), karmada=self.api)

    def admitted(self, intensities: Mapping[str, float], hour: int = 0) -> dict[str, Any]:
        """The PropagationPolicy as the webhook stores it when created in ``hour``."""
        return admitted(self.target, self.obj, self.context(intensities, hour))

    def placement(self, intensities: Mapping[str, float], hour: int = 0) -> dict[str, Any]:
        """``spec.placement`` as the webhook writes it for these intensities per cluster."""
        out: dict[str, Any] = self.admitted(intensities, hour)["spec"]["placement"]
        return out

    def create(self, intensities: Mapping[str, float], hour: int) -> Held:
        """The placement admission writes in ``hour``."""
        key = (hour, tuple(intensities.items()))
        held = self._memo.get(key)
        if held is None:
            stored = self.admitted(intensities, hour)
            held = Held(self.members.intent(stored["spec"]["placement"]), stored)
            _remember(self._memo, key, held)
        return held

    def reevaluate(self, held: Held, intensities: Mapping[str, float], hour: int) -> Held:
        """The leader's re-evaluation of the stored policy in ``hour``: ``held`` itself
        when nothing is written."""
        stored = held.stored
        assert stored is not None
        key = (id(stored), hour, tuple(intensities.items()))
        done = self._revisits.get(key)
        if done is not None and done[0] is stored:  # workloads admitted alike, still alike
            return held if done[1] is None else done[1]
        ctx = self.context(intensities, hour)
        action = self.leader.decide(self.target, stored, ctx, NAMESPACE_LABELS)
        out = None
        if action.changes:
            new = action.applied(stored)
            out = Held(self.members.intent(new["spec"]["placement"]), new)
        _remember(self._revisits, key, (stored, out))
        return held if out is None else out

    def __call__(self, intensities: Mapping[str, float]) -> Intent:
        """The intent admission writes for these intensities."""
        return self.create(intensities, 0).intent


@dataclasses.dataclass(frozen=True, slots=True)
class SpatialPolicy:
    """One spatial policy: a proposal plus whether it is re-evaluated."""

    key: str
    label: str
    propose: Propose
    """The intent for an hour's intensities; a :class:`WebhookProposal` runs the product."""
    reevaluate: bool = False
    """Re-evaluate movable workloads every interval (else: decided at creation only)."""
    forecast: Method | None = None
    """Rank on the forecast mean over ``horizon_hours`` instead of the current intensity."""
    horizon_hours: int = 1
    info: str = "current intensity"
    """Which intensity information the policy uses (shown in the results)."""
    move: MoveRule | None = None
    """The leader's move-back of an ordered fill (:func:`capacity.plan_move`); None: never."""
    move_budget: int = 0
    """Replicas the leader may move per hour across the fleet."""

    def create(self, intensities: Mapping[str, float], hour: int) -> Held:
        """The placement a workload created in ``hour`` gets."""
        if isinstance(self.propose, WebhookProposal):
            return self.propose.create(intensities, hour)
        return Held(self.propose(intensities))

    def revisit(self, held: Held, intensities: Mapping[str, float], hour: int) -> Held:
        """The placement to have in ``hour`` given the one ``held`` (``held`` itself: kept).

        carbonshift's policies run the leader's re-evaluation; the others switch whenever
        their proposal changes."""
        if isinstance(self.propose, WebhookProposal):
            return self.propose.reevaluate(held, intensities, hour)
        intent = self.propose(intensities)
        return held if intent == held.intent else Held(intent)


GREEDY = "greedy-top"
"""Key prefix of the greedy top-N operator's row, whose moves set the spatial target's
move budget (:func:`webhook.simulate.budget.move_budget`)."""


def greedy(compare: Compare, clusters: Sequence[str]) -> SpatialPolicy:
    """The greedy top-N operator (``compare.top_n``): the N greenest clusters, weight 1
    each, re-ranked every interval."""
    top_n = min(compare.top_n, len(clusters))
    return SpatialPolicy(
        f"{GREEDY}{top_n}",
        f"greedy top-{top_n}, re-ranked every interval",
        propose_top_n(top_n),
        reevaluate=True,
    )


DEFAULT_SPATIAL = "fill-forecast"
"""The spatial row carbonshift's default behaviour stands for: what the webhook does with
its default config to a plain Divided PropagationPolicy (no annotations). The ordered fill
at admission, then the leader's re-evaluation (``reevaluate.enabled``, ``forecast:
day-ahead-profile``) re-orders the tiers on the forecast mean over the next 24 h through
the hysteresis (``hysteresis.margin`` / ``dwell_hours``) and moves replicas back to
greener tiers (``rebalance``, :func:`webhook.decision.karmada.capacity.plan_move`)."""


def spatial_policies(
    config: Config,
    compare: Compare,
    clusters: Sequence[str],
    zones: Mapping[str, str] | None = None,
) -> list[SpatialPolicy]:
    """The spatial line-up: baseline first, then the policies under comparison.

    carbonshift's rows run under ``config`` (a scenario's ``policy``), the others and the
    annotations and forecast of the rows that use them take ``compare``. ``zones`` maps
    each cluster to its grid zone (default: the cluster's name); the webhook-backed
    proposals see one ClusterConfig per cluster.
    """
    s = compare
    zone_of = zones or {}  # untyped: an optional parameter
    members = Members({n: ClusterConfig(n, zone=zone_of.get(n, n)) for n in clusters})
    forecast = f"{s.forecast.value} forecast, mean over {s.forecast_hours} h"
    rebalance = config.rebalance
    move = rebalance if rebalance.enabled else None

    def webhook(release: str | None = None, **knobs: Any) -> WebhookProposal:
        under = config
        if release is not None:
            under = msgspec.structs.replace(config, karmada=KarmadaConfig(release))
        return WebhookProposal(policy_object(clusters, **knobs), members, under)

    def held(key: str, label: str, propose: Propose, *, ahead: bool = False) -> SpatialPolicy:
        """Re-evaluated every interval by the leader's step, optionally on the forecast;
        the leader moves replicas of an ordered fill back (``rebalance:``)."""
        out = SpatialPolicy(key, label, propose, reevaluate=True)
        if ahead:
            out = dataclasses.replace(
                out, forecast=s.forecast, horizon_hours=s.forecast_hours, info=forecast
            )
        if move is not None:
            out = dataclasses.replace(out, move=move, move_budget=rebalance.max_moves_per_hour)
        return out

    fill = webhook()
    groups = webhook(GROUPS_RELEASE)
    carbon = webhook(strategy="weighted")
    weighted_terms = webhook(max_clusters=s.max_clusters, strategy="weighted")
    available_terms = webhook(max_clusters=s.max_clusters, available=True)
    first = min(s.max_clusters, len(clusters))
    return [
        SpatialPolicy("baseline", "carbon-agnostic: even split, fixed", propose_even, info="none"),
        greedy(s, clusters),
        SpatialPolicy(
            "static-weights",
            "carbon weights (strategy weighted) at creation only",
            carbon,
            info="intensity at creation",
        ),
        held("weights-hysteresis", "carbon weights, re-evaluated with hysteresis + dwell", carbon),
        held(
            "weights-forecast",
            "carbon weights on a forecast, hysteresis + dwell",
            carbon,
            ahead=True,
        ),
        held(
            "green-first",
            f"green-first affinities (max {first}) + carbon weights, hysteresis + dwell",
            weighted_terms,
        ),
        held(
            "green-first-forecast",
            "green-first affinities + carbon weights on a forecast, hysteresis + dwell",
            weighted_terms,
            ahead=True,
        ),
        held(
            "green-first-available",
            f"max-clusters {first}, strategy none, divided by available replicas"
            " (examples/30-...): ordered fill, hysteresis + dwell, move-back",
            available_terms,
        ),
        held(
            "green-first-available-forecast",
            f"max-clusters {first}, strategy none, divided by available replicas:"
            " ordered fill on a forecast, hysteresis + dwell, move-back",
            available_terms,
            ahead=True,
        ),
        held(
            "max-intensity",
            f"max-intensity filter ({s.max_intensity:g}) + carbon weights, hysteresis + dwell",
            webhook(max_intensity=s.max_intensity, strategy="weighted"),
        ),
        SpatialPolicy(
            "fill-static",
            "ordered fill at creation only",
            fill,
            info="intensity at creation",
        ),
        held(
            "fill",
            "ordered fill on current intensity, hysteresis + dwell, move-back",
            fill,
        ),
        held(
            "fill-forecast",
            "ordered fill on a forecast, hysteresis + dwell, move-back",
            fill,
            ahead=True,
        ),
        held(
            "fill-groups",
            f"ordered fill as failover groups (Karmada {GROUPS_RELEASE}) on current intensity,"
            " hysteresis + dwell, move-back",
            groups,
        ),
        held(
            "fill-groups-forecast",
            f"ordered fill as failover groups (Karmada {GROUPS_RELEASE}) on a forecast,"
            " hysteresis + dwell, move-back",
            groups,
            ahead=True,
        ),
        held(
            "fill-max-clusters",
            f"ordered fill, greenest {first} share the first tier, on a forecast, move-back",
            webhook(max_clusters=s.max_clusters),
            ahead=True,
        ),
        held(
            "fill-max-intensity",
            f"ordered fill under max-intensity ({s.max_intensity:g}), on a forecast, move-back",
            webhook(max_intensity=s.max_intensity),
            ahead=True,
        ),
    ]
