"""Carbon-based placement for Karmada PropagationPolicy / ClusterPropagationPolicy.

Given the policy object, the known member clusters and the in-memory intensities,
decide (docs/annotations.md):

- candidates: the clusters the policy already allows (never more);
- ``carbonshift.io/max-intensity``: exclude candidates above the limit;
- Divided policies (strategy ``fill``, the default): ordered fill, divided by
  ``dynamicWeight: AvailableReplicas``, in the shape the Karmada API keeps
  (:mod:`webhook.decision.karmada.api`): from v1.18 one ``clusterAffinities`` term whose
  inline affinity is the greenest cluster and whose ``overflowAffinities`` are the others,
  greenest first (Karmada fills the greenest cluster up to its room, then the next,
  :mod:`webhook.decision.karmada.capacity`); before, ordered failover groups, term *k*
  holding tiers 0 to *k* (Karmada tries them in order and takes the first whose clusters
  hold the replicas);
- ``carbonshift.io/max-clusters``: the greenest N share the first tier (ordered fill), or
  green-first ``clusterAffinities`` where the fill cannot be written;
- ``carbonshift.io/strategy: weighted``: a static weight list (also where the ordered fill
  cannot be written);
- ``carbonshift.io/strategy: none`` on a policy Karmada already divides by room
  (``dynamicWeight: AvailableReplicas`` or Aggregated): no weights, and with
  ``max-clusters`` or ``max-intensity`` the ordered fill's tiers, the division the user's
  own, so a full first tier overflows to the next greenest cluster, never to the dirtiest.

Fields the user set are never overwritten unless ``carbonshift.io/override: "true"``.
The user's intent is never changed, with or without override (README "PropagationPolicy
interactions"): reach never widens (a user ``staticWeightList`` is reach too: Karmada gives
unlisted clusters no replicas), ``spreadConstraints`` ``minGroups`` stay reachable, open
selections (selectors, or no affinity) keep matching clusters carbonshift does not know,
and static weights are never written where Karmada would then ignore the spread constraints
or reject ``overflowAffinities``. What carbonshift leaves alone for that is warned about and
listed in the decision record (``left``: rule and reason).

The shapes it reads and writes are :mod:`webhook.decision.karmada.terms`; whether a recomputed
placement replaces the one in force (hysteresis, dwell) is :mod:`webhook.decision.karmada.holding`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from webhook.decision.hysteresis import NO_HYSTERESIS, Hysteresis
from webhook.decision.karmada import carry
from webhook.decision.karmada.api import GROUPS, KarmadaApi
from webhook.decision.karmada.holding import Proposal
from webhook.decision.karmada.pruning import dropped, still_owned
from webhook.decision.karmada.terms import (
    FILL,
    GREEN_TERM,
    OTHERS_TERM,
    OWN,
    ROUND_KEY,
    SELECTOR_KEYS,
    TIER_TERM,
    Tiers,
    diff,
    dynamic,
    exclude,
    fill_order,
    green_first_terms,
    group_name,
    named,
    record_of,
    round_of,
    selected_groups,
    unweighted_terms,
    weighted,
)
from webhook.decision.karmada.view import Division, PlacementView
from webhook.decision.outcome import Decision, lookup, short
from webhook.decision.ranking import carbon_weights, order_greenest, within_limit
from webhook.decision.reason import EXCLUDED
from webhook.decision.record import Record, history, user_view
from webhook.decision.selectors import SelectorError, is_open
from webhook.model import vocabulary
from webhook.model.config import ClusterConfig, WeightingConfig
from webhook.model.intensity import IntensityTable
from webhook.model.objects import items, mapping, meta_of
from webhook.model.vocabulary import DECISION, MAX_CLUSTERS, MAX_INTENSITY, Knobs

_OTHERS = "\x00others"
"""Stand-in for clusters an open selection matches that carbonshift does not know."""

Warn = Callable[[str], None]


@dataclasses.dataclass(slots=True)
class _Notes:
    """Warnings, and the rules carbonshift left unapplied (record ``left``)."""

    warnings: list[str]
    left: list[dict[str, str]] = dataclasses.field(default_factory=list)
    excluded: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Record ``excluded``: the candidates ``max-intensity`` excluded (``names``, greenest
    first) and the limit (``max``, gCO2eq/kWh); empty: none."""

    def warn(self, text: str) -> None:
        self.warnings.append(short(text))

    def body(self, others: int | None) -> dict[str, Any]:
        """Record entries: catch-all weight (``others``), what was left (``left``) and
        what ``max-intensity`` excluded (``excluded``)."""
        out: dict[str, Any] = {"others": {"w": others}} if others is not None else {}
        if self.left:
            out["left"] = self.left
        if self.excluded:
            out[EXCLUDED] = self.excluded
        return out

    def leave(self, rule: str, reason: str) -> None:
        """``rule`` is not applied because of ``reason``: warn and record it."""
        self.left.append({"rule": rule, "reason": reason})
        self.warn(f"carbonshift: {rule} not applied: {reason}")


@dataclasses.dataclass(frozen=True, slots=True)
class _Spread:
    """The ``minGroups`` floors of the user's ``spreadConstraints`` Karmada enforces.

    The scheduler groups by ``cluster`` and ``region`` only (zone and provider
    constraints select nothing; ``select_clusters.go``). A cluster counts towards a
    region only when its region is known from the config.
    """

    present: bool = False
    clusters: int = 0
    regions: int = 0

    @classmethod
    def of(cls, constraints: object) -> _Spread:
        if not isinstance(constraints, list) or not constraints:
            return cls()
        clusters = regions = 0
        for c in constraints:
            if not isinstance(c, dict):
                continue
            floor = c.get("minGroups") or 1  # karmada-webhook defaults 0 to 1
            floor = floor if isinstance(floor, int) else 1
            field = c.get("spreadByField") or ("" if c.get("spreadByLabel") else "cluster")
            if field == "cluster":
                clusters = max(clusters, floor)
            elif field == "region":
                regions = max(regions, floor)
        return cls(True, clusters, regions)

    def met(self, names: Iterable[str], known: Mapping[str, ClusterConfig]) -> bool:
        """True when ``names`` meet the floors; only clusters in the config count."""
        chosen = {n for n in names if n in known}
        if len(chosen) < self.clusters:
            return False
        regions = {c.region for n in chosen if (c := known.get(n)) is not None and c.region}
        return len(regions) >= self.regions

    def size(self, order: list[str], n: int, known: Mapping[str, ClusterConfig]) -> int | None:
        """Smallest k >= n whose greenest k meet the floors (None: no k does)."""
        for k in range(min(n, len(order)), len(order) + 1):
            if self.met(order[:k], known):
                return max(k, n)
        return None


@dataclasses.dataclass(frozen=True, slots=True)
class PolicyInputs:
    """Everything a placement decision depends on besides the object itself."""

    clusters: Mapping[str, ClusterConfig]
    table: IntensityTable
    weighting: WeightingConfig = WeightingConfig()
    hysteresis: Hysteresis = NO_HYSTERESIS
    """When a recomputed placement may replace the one in force (refresh only)."""
    now: datetime | None = None
    """Decision time, for the minimum dwell of the placement in force."""
    carried: bool = False
    """A leader carries the non-workloads a policy selects to every tier
    (:mod:`webhook.decision.karmada.carry`); without one a policy that selects them beside its
    workloads keeps all its clusters in one group."""
    api: KarmadaApi = GROUPS
    """What the Karmada policy API keeps: the ordered fill's shape (``overflowAffinities``
    from v1.18, else failover groups; :mod:`webhook.decision.karmada.api`)."""


UNCARRIED_NOTE = (
    "{kinds} would reach the first tier only: no leader to carry them (needs a cluster connection)"
)

LAZY_NOTE = (
    "activationPreference Lazy: Karmada applies placement changes only when the resource"
    " template changes"
)


def decide(policy: Mapping[str, Any], inputs: PolicyInputs) -> Decision:
    """Decide the placement for a (Cluster)PropagationPolicy object."""
    annotations = meta_of(policy).annotations
    spec = mapping(policy, "spec")
    current = mapping(spec, "placement")
    previous, api = _as_written(current, Record.decode(annotations.get(DECISION)), inputs.api)
    base = user_view(current, previous, OWN)
    knobs = vocabulary.knobs(annotations, "policy")
    override = knobs.override
    decision = Decision()
    notes = _Notes(decision.warnings)
    warn = notes.warn
    decision.warnings.extend(vocabulary.warning(p) for p in knobs.problems)
    known = inputs.clusters

    view = PlacementView.of(base)
    reach = view.reach
    try:
        groups = selected_groups(base, known, reach)
    except SelectorError as exc:
        decision.skipped = f"placement not understood: {exc}"
        warn(f"carbonshift: {decision.skipped}")
        return decision
    candidates = sorted({n for g in groups for n in g})
    if not candidates:
        decision.skipped = (
            "placement left as is: no known cluster has a static weight in the policy"
            if reach is not None
            else "no candidate cluster is known (no Karmada Cluster matches and none in clusters:)"
        )
        warn(f"carbonshift: {decision.skipped}")
        return decision

    picked = carry.selection(spec)
    if _no_workload(picked, decision):
        return decision

    zones = {n: (c.grid_zone if (c := known.get(n)) else None) for n in candidates}
    data = lookup(zones, inputs.table)
    decision.warnings.extend(data.warnings())
    new = dict(base)
    user_terms = bool(base.get("clusterAffinities"))
    shape = _Shape(
        spread=_Spread.of(base.get("spreadConstraints")),
        overflow=view.has_overflow,
        reach=reach,
        # Open: the selection matches clusters by selectors (or every cluster), so clusters
        # carbonshift does not know, or that join later, must stay reachable.
        opened=view.opened and (reach is None or any(map(is_open, reach))),
        known=known,
        unweighted=unweighted_terms(base, known, reach),
        api=api,
        round=round_of(previous),
    )
    if picked.mixed and not inputs.carried:
        # Karmada sends non-workloads to a term's primary group only: without a leader to
        # carry them, every cluster a replica can reach must be in that one group.
        shape = dataclasses.replace(shape, uncarried=", ".join(picked.others))
    limits = _Limits(user_terms and not override, groups, shape.spread, known, reach is not None)
    intensities = _apply_limit(new, dict(data.values), knobs.max_intensity, limits, notes)
    # What the limit excluded is the one edit made to the copy so far: without any it
    # reads as the user's view, already read.
    limited = PlacementView.of(new) if notes.excluded else view
    tiers, weights, others = _place(
        new,
        intensities,
        knobs,
        shape,
        user_terms,
        view=limited,
        weighting=inputs.weighting,
        notes=notes,
    )

    changes = diff(current, new)
    if not changes and not notes.left and (why := _left_as_is(view)):
        decision.skipped = f"placement left as is: {why}"
        warn(f"carbonshift: {decision.skipped}")
        return decision
    held = Proposal(previous, current, new, weights, data.values) if changes else None
    if held is not None and held.keep(inputs.hysteresis, inputs.now, warn):
        decision.record = previous
        return decision
    body = data.body(weights) | notes.body(others) | _kept_whole(picked, inputs, new, spec, warn)
    _tiered(body, tiers, shape)
    # When this placement came into force: the data time of the decision that made it
    # (deterministic for given inputs, so identical reviews get identical answers).
    body["since"] = (not changes and previous.since) or body["at"]
    decision.record = record_of(base, new, body | history(previous))
    decision.changes = changes
    return decision


def _tiered(body: dict[str, Any], tiers: Tiers, shape: _Shape) -> None:
    """Record entries of an ordered fill: each cluster's tier (``t``), the shape written
    and why (``shape``, ``karmada``), and the failover groups' naming round (``round``)."""
    if not tiers:
        return
    for k, tier in enumerate(tiers):
        for name in tier:
            body["clusters"][name]["t"] = k
    api = shape.api
    body["shape"], body["karmada"] = api.shape, api.why
    if shape.round and not api.overflow:
        body[ROUND_KEY] = shape.round


def _as_written(
    current: Mapping[str, Any], previous: Record, api: KarmadaApi
) -> tuple[Record, KarmadaApi]:
    """The record to decide from and the API to write for. When the API server cut what
    carbonshift wrote (:func:`~webhook.decision.karmada.pruning.dropped`), what it stored
    is still carbonshift's, and the placement is written as failover groups, the shape
    that API demonstrably keeps."""
    lost = dropped(current, previous)
    if not lost:
        return previous, api
    return still_owned(previous, current, lost), KarmadaApi(False, "stored")


def _no_workload(picked: carry.Selection, decision: Decision) -> bool:
    """A policy that selects only non-workloads has no replicas to place: left as is."""
    if not picked.no_workload:
        return False
    decision.skipped = (
        f"placement left as is: the policy selects no workload ({', '.join(picked.others)});"
        " Karmada sends it to every cluster of the placement"
    )
    decision.warnings.append(short(f"carbonshift: {decision.skipped}"))
    return True


def _kept_whole(
    picked: carry.Selection,
    inputs: PolicyInputs,
    placement: Mapping[str, Any],
    spec: Mapping[str, Any],
    warn: Warn,
) -> dict[str, Any]:
    """Record entries: the non-workload kinds the leader carries to every tier (``carry``)
    and a Lazy activation (``lazy``: later changes wait for the template)."""
    out: dict[str, Any] = {}
    if picked.mixed and inputs.carried and carry.carbonshift_terms(placement):
        out["carry"] = list(picked.others)
    if spec.get("activationPreference") == "Lazy":
        out["lazy"] = True
        warn(f"carbonshift: {LAZY_NOTE}")
    return out


@dataclasses.dataclass(frozen=True, slots=True)
class _Shape:
    """What in the user's policy bounds what carbonshift may write."""

    spread: _Spread
    overflow: bool
    reach: Sequence[Mapping[str, Any]] | None
    """The user's static weight targets (Karmada's reach), None: no user static weights."""
    opened: bool
    known: Mapping[str, ClusterConfig]
    unweighted: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """Open user terms none of whose known clusters has a user static weight: Karmada
    weighs all their clusters 1, so their unknown clusters stay reachable too."""
    uncarried: str | None = None
    """The non-workload kinds the policy selects beside its workloads when no leader
    carries them (:mod:`webhook.decision.karmada.carry`): no tiers then, one group."""
    api: KarmadaApi = GROUPS
    """What the Karmada API keeps: the ordered fill's shape."""
    round: int = 0
    """The failover groups' naming round (the leader's move backs rename them)."""

    def fill(
        self,
        placement: dict[str, Any],
        intensities: Mapping[str, float | None],
        first: int | None,
    ) -> Tiers:
        """Ordered fill in the shape the API keeps: one term, the greenest tier inline, the
        others as overflow tiers (``overflow``); or failover terms, the greenest tier, then
        each adding the next tier (``groups``).

        ``first``: how many clusters share the first tier (``max-clusters``; default:
        the greenest, with any equally green). Each tier keeps the user's selectors; an
        open selection ends in a tier for the clusters carbonshift does not know (a last
        group: the user's selection itself). Returns the tiers written, greenest first.
        """
        tiers = fill_order(intensities, first)
        affinity = mapping(placement, "clusterAffinity")
        selectors = {k: affinity[k] for k in SELECTOR_KEYS if affinity.get(k)}
        term: dict[str, Any] = {"affinityName": GREEN_TERM, **selectors, "clusterNames": tiers[0]}
        if not self.api.overflow:
            terms, names = [term], list(tiers[0])
            for k, tier in enumerate(tiers[1:], 1):
                names = [*names, *tier]
                name = group_name(k, self.round)
                terms.append({"affinityName": name, **selectors, "clusterNames": names})
            if self.opened:
                terms.append({"affinityName": group_name(0, self.round, others=True), **selectors})
            placement["clusterAffinities"] = terms
        else:
            overflow = [
                {"affinityName": f"{TIER_TERM}{k}", **selectors, "clusterNames": names}
                for k, names in enumerate(tiers[1:], 1)
            ]
            if self.opened:
                named = {n for t in tiers for n in t} | set(items(selectors, "exclude"))
                overflow.append(
                    {"affinityName": OTHERS_TERM, **selectors, "exclude": sorted(named)}
                )
            if overflow:
                term["overflowAffinities"] = overflow
            placement["clusterAffinities"] = [term]
        placement.pop("clusterAffinity", None)
        placement["replicaScheduling"] = dynamic(placement.get("replicaScheduling"))
        return tiers

    def green_first(
        self,
        placement: dict[str, Any],
        order: list[str],
        n: int,
        notes: _Notes,
        limit: float | None = None,
    ) -> bool:
        """Green-first ``clusterAffinities`` (``max-clusters``); True when written.

        ``limit``: ``max-intensity``, said not to apply to the user's unweighted clusters
        the fallback keeps (they were never candidates, so never checked against it)."""
        if self.uncarried:
            notes.leave(MAX_CLUSTERS, UNCARRIED_NOTE.format(kinds=self.uncarried))
            return False
        if self.overflow:
            notes.leave(MAX_CLUSTERS, "it would drop the policy's overflowAffinities")
            return False
        if self.spread.present and self.reach is not None:
            # A green term's clusters without a user weight get no replicas: the spread
            # Karmada selects could then fall below minGroups.
            notes.leave(MAX_CLUSTERS, "the policy's static weights and spreadConstraints apply")
            return False
        spread, known = self.spread, self.known
        size = spread.size(order, n, known)
        if size is None:
            notes.leave(MAX_CLUSTERS, "the candidates cannot meet spreadConstraints minGroups")
            return False
        if size > n:
            notes.warn(
                f"carbonshift: the greenest term has {size} clusters instead of {n},"
                " to meet spreadConstraints minGroups"
            )
        rest = order[size:]
        if spread.present and rest and not spread.met(rest, known):
            rest = order  # a fallback below minGroups would always be skipped
        if self.reach is not None:
            # Karmada weighs every feasible cluster 1 when none of the weighted ones is
            # feasible: the user's unweighted clusters stay in the fallback for that case.
            unweighted = [name for name in named(placement) if name not in order]
            if unweighted and limit is not None:
                which = (
                    ", ".join(unweighted) if len(unweighted) < 3 else f"{len(unweighted)} clusters"
                )
                notes.leave(MAX_INTENSITY, f"fallback keeps {which} (no static weight)")
            rest = [*rest, *unweighted]
        terms = green_first_terms(placement, order[:size], rest, opened=self.opened)
        placement["clusterAffinities"] = terms
        placement.pop("clusterAffinity", None)
        return True


def _place(
    placement: dict[str, Any],
    intensities: Mapping[str, float | None],
    knobs: Knobs,
    shape: _Shape,
    user_terms: bool,
    *,
    view: PlacementView,
    weighting: WeightingConfig,
    notes: _Notes,
) -> tuple[Tiers, dict[str, int] | None, int | None]:
    """Write the ordered fill, or else green-first terms and carbon weights.

    ``view``: ``placement`` as read (:meth:`PlacementView.of`). Returns the fill's tiers
    (empty: not written), the static weights and the catch-all weight
    (:func:`_apply_weights`).
    """
    if _wants_fill(view, knobs, shape, user_terms, notes):
        return shape.fill(placement, intensities, knobs.max_clusters), None, None
    green = False
    if knobs.max_clusters is not None:
        if user_terms and not knobs.override:
            notes.leave(MAX_CLUSTERS, "the policy has its own clusterAffinities")
        else:
            order = order_greenest(intensities)
            green = shape.green_first(
                placement, order, knobs.max_clusters, notes, knobs.max_intensity
            )
    weights, others = _apply_weights(
        placement, intensities, knobs, shape, green, weighting=weighting, notes=notes
    )
    return [], weights, others


def _apply_weights(
    placement: dict[str, Any],
    intensities: Mapping[str, float | None],
    knobs: Knobs,
    shape: _Shape,
    green: bool,
    *,
    weighting: WeightingConfig,
    notes: _Notes,
) -> tuple[dict[str, int] | None, int | None]:
    """Static carbon weights for Divided policies.

    Returns the weights per candidate (None: not applied) and the weight of the catch-all
    entries that keep an open selection's other clusters reachable (None: none written).
    """
    scheduling = placement.get("replicaScheduling")
    view = PlacementView.of(placement)
    if not _wants_weights(view, knobs.strategies, notes):
        return None, None
    rule = "carbon weights"
    if shape.spread.present:
        notes.leave(rule, "Karmada would ignore spreadConstraints under static weights")
        return None, None
    if shape.overflow:
        notes.leave(rule, "overflowAffinities need dynamicWeight or Aggregated division")
        return None, None
    blocker = _weight_blocker(view)
    if blocker and not knobs.override:
        within = green and shape.reach is not None  # they split the greenest term's replicas
        notes.leave(rule, blocker + (", within the greenest term" if within else ""))
        return None, None
    targets: list[dict[str, Any]] = []
    if shape.opened:
        reach = shape.reach or [{}]
        targets = [dict(t) for t in reach if is_open(t)]
    targets += shape.unweighted
    if not targets:
        weights = carbon_weights(intensities, exponent=weighting.exponent, scale=weighting.scale)
        placement["replicaScheduling"] = weighted(scheduling, weights, [], 0)
        return weights, None
    # Clusters the selection matches that carbonshift does not know weigh as unknown
    # intensity does (neutral); without an entry Karmada would give them no replicas.
    every = carbon_weights(
        {**intensities, _OTHERS: None}, exponent=weighting.exponent, scale=weighting.scale
    )
    others = every.pop(_OTHERS)
    named = sorted(every)
    catch_all = [{**t, "exclude": sorted(set(items(t, "exclude")) | set(named))} for t in targets]
    placement["replicaScheduling"] = weighted(scheduling, every, catch_all, others)
    return every, others


# --- rules ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class _Limits:
    """What bounds ``max-intensity``: user terms (blocked) and the spread floors."""

    blocked: bool
    groups: list[list[str]]
    """The candidates of each affinity term (with its overflow), or of the one affinity."""
    spread: _Spread
    known: Mapping[str, ClusterConfig]
    weighted: bool = False
    """The user's static weights bound the groups: a group left without a weighted
    cluster would weigh all its clusters 1 (Karmada), reaching clusters it did not."""


def _apply_limit(  # noqa: PLR0912 - one pass over the spread and weight floors, in rule order
    placement: dict[str, Any],
    intensities: dict[str, float | None],
    limit: float | None,
    limits: _Limits,
    notes: _Notes,
) -> dict[str, float | None]:
    """Exclude candidates above ``max-intensity``; returns the remaining candidates.

    Never below the spread ``minGroups`` of a term (or the affinity) that met them: the
    greenest excluded clusters stay until it does again.
    """
    if limit is None:
        return intensities
    kept, dropped = within_limit(intensities, limit)
    if dropped and not any(n in limits.known for n in kept):
        kept.append(dropped.pop(0))  # never leave only clusters the config does not know
    above = [n for n in kept if (v := intensities[n]) is not None and v > limit]
    if above:
        notes.warn(
            f"carbonshift: every known candidate is above {limit:g} gCO2eq/kWh; keeping {above[0]}"
        )
    if not dropped:
        return intensities
    if limits.blocked:
        notes.leave(MAX_INTENSITY, "the policy has its own clusterAffinities")
        return intensities
    spread, known = limits.spread, limits.known
    restored: list[str] = []
    for group in limits.groups:
        if not spread.met(group, known):
            continue
        for name in [n for n in dropped if n in group]:  # greenest first
            if spread.met([n for n in group if n not in dropped], known):
                break
            dropped.remove(name)
            restored.append(name)
    if restored:
        notes.leave(
            MAX_INTENSITY, f"{', '.join(restored)} kept to meet spreadConstraints minGroups"
        )
    if limits.weighted:
        kept_for_weights = []
        for group in limits.groups:
            if group and all(n in dropped for n in group):
                name = next(n for n in dropped if n in group)  # the greenest
                dropped.remove(name)
                kept_for_weights.append(name)
        if kept_for_weights:
            notes.leave(
                MAX_INTENSITY,
                f"{', '.join(kept_for_weights)} kept: the last with a static weight in a term",
            )
    if not dropped:
        return intensities
    exclude(placement, dropped)
    notes.excluded = {"max": limit, "names": list(dropped)}
    return {n: v for n, v in intensities.items() if n not in dropped}


def _wants_fill(
    view: PlacementView, knobs: Knobs, shape: _Shape, user_terms: bool, notes: _Notes
) -> bool:
    """Whether the ordered fill is written; what keeps a wanted one out is left (warned)."""
    names = knobs.strategies
    if "weighted" in names and "fill" not in names:
        return False
    if "none" in names:
        # The user's own division by room stays; a knob that orders clusters
        # (max-clusters, max-intensity) orders the tiers it fills, never a cliff.
        ordered = knobs.max_clusters is not None or knobs.max_intensity is not None
        blocked = user_terms or shape.spread.present or shape.reach is not None
        blocked = blocked or shape.uncarried is not None
        return ordered and view.by_room and not blocked
    if not view.division.divided:
        if "fill" not in names:
            return False
        if view.scheduling:
            notes.leave(FILL, DUPLICATED_NOTE)
            return False
        # No replicaScheduling: written as Divided, unless something below keeps it out.
    reason = None
    if user_terms:
        reason = "the policy has its own clusterAffinities"
    elif shape.spread.present:
        reason = "spreadConstraints choose the clusters"
    elif shape.reach is not None:
        reason = "the policy's own static weights bound where replicas go"
    elif shape.uncarried:
        reason = f"{UNCARRIED_NOTE.format(kinds=shape.uncarried)}"
    if reason is not None:
        notes.leave(FILL, reason + "; carbon weights instead" if shape.reach is None else reason)
        return False
    return True


def _wants_weights(view: PlacementView, names: frozenset[str], notes: _Notes) -> bool:
    if "none" in names:
        return False
    if view.division.divided:
        return True
    if "weighted" in names:
        if view.scheduling:
            notes.leave("carbon weights", DUPLICATED_NOTE)
            return False
        return True  # no replicaScheduling: written as Divided
    return False


_BLOCKERS = {
    Division.AGGREGATED: "the policy uses Aggregated division",
    Division.DYNAMIC_WEIGHT: "the policy uses dynamicWeight",
    Division.STATIC_WEIGHT: "the policy's own static weights are kept",
}


def _weight_blocker(view: PlacementView) -> str | None:
    """Why the user's own division keeps carbon weights out (unless ``override``)."""
    return _BLOCKERS.get(view.division)


DUPLICATED_NOTE = "Duplicated gives each cluster all replicas; set replicaSchedulingType: Divided"
"""Why nothing is divided under ``replicaSchedulingType: Duplicated``, and what to do."""

UNSCHEDULED_NOTE = "no replicaScheduling means Duplicated; set replicaSchedulingType: Divided"
"""The same without ``replicaScheduling`` (Karmada duplicates)."""


def _left_as_is(view: PlacementView) -> str | None:
    """Why a placement carbonshift wrote nothing into was left as is: Karmada duplicates
    it. None when the policy is divided (its own reasons are warned where they arise)."""
    if view.division.divided:
        return None
    return DUPLICATED_NOTE if view.scheduling else UNSCHEDULED_NOTE
