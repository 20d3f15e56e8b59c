"""Carbon-based placement for Karmada PropagationPolicy / ClusterPropagationPolicy.

Given the policy object, the known member clusters and the in-memory intensities,
decide (see README "Annotations"):

- candidates: the clusters the policy already allows (never more);
- ``carbonshift.io/max-intensity``: exclude candidates above the limit;
- Divided policies (strategy ``fill``, the default): ordered fill. One
  ``clusterAffinities`` term whose inline affinity is the greenest cluster and whose
  ``overflowAffinities`` are the others, greenest first, divided by
  ``dynamicWeight: AvailableReplicas``: Karmada fills the greenest cluster up to its
  room, then the next (:mod:`webhook.decision.capacity`);
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
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from webhook.decision.hysteresis import Held, Hysteresis, Verdict, judge
from webhook.decision.outcome import REMOVE, Change, Decision, lookup, short
from webhook.decision.ranking import carbon_weights, order_greenest, within_limit
from webhook.decision.record import Record, fingerprint, history, user_view
from webhook.decision.selectors import SelectorError, allowed_clusters, is_open
from webhook.model import vocabulary
from webhook.model.config import ClusterConfig, WeightingConfig
from webhook.model.intensity import IntensityTable
from webhook.model.vocabulary import DECISION, MAX_CLUSTERS, MAX_INTENSITY, Knobs

Tiers = list[list[str]]

GREEN_TERM = "carbonshift-greenest"
FALLBACK_TERM = "carbonshift-fallback"
TIER_TERM = "carbonshift-tier-"
"""Overflow tiers of the ordered fill: ``carbonshift-tier-1``, ``-2``... (greenest first)."""
OTHERS_TERM = "carbonshift-others"
"""Last overflow tier of an open selection: the clusters carbonshift does not know."""
FILL = "ordered fill"
_TIER_DEPTH = 10
"""Tiers the hysteresis tells apart in an ordered fill (:func:`in_force`)."""
_OWN = "placement."
_SELECTOR_KEYS = ("labelSelector", "fieldSelector", "exclude")

_OTHERS = "\x00others"
"""Stand-in for clusters an open selection matches that carbonshift does not know."""

Warn = Callable[[str], None]


@dataclasses.dataclass(slots=True)
class _Notes:
    """Warnings, and the rules carbonshift left unapplied (record ``left``)."""

    warnings: list[str]
    left: list[dict[str, str]] = dataclasses.field(default_factory=list)

    def warn(self, text: str) -> None:
        self.warnings.append(short(text))

    def body(self, others: int | None) -> dict[str, Any]:
        """Record entries: catch-all weight (``others``) and what was left (``left``)."""
        out: dict[str, Any] = {"others": {"w": others}} if others is not None else {}
        if self.left:
            out["left"] = self.left
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
    hysteresis: Hysteresis = Hysteresis()
    """When a recomputed placement may replace the one in force (refresh only)."""
    now: datetime | None = None
    """Decision time, for the minimum dwell of the placement in force."""


def decide(policy: Mapping[str, Any], inputs: PolicyInputs) -> Decision:
    """Decide the placement for a (Cluster)PropagationPolicy object."""
    meta = policy.get("metadata") or {}
    annotations: Mapping[str, str] = meta.get("annotations") or {}
    spec = policy.get("spec") or {}
    current: Mapping[str, Any] = spec.get("placement") or {}
    previous = Record.decode(annotations.get(DECISION))
    base = user_view(current, previous, _OWN)
    knobs = vocabulary.knobs(annotations, "policy")
    override = knobs.override
    decision = Decision()
    notes = _Notes(decision.warnings)
    warn = notes.warn
    decision.warnings.extend(vocabulary.warning(p) for p in knobs.problems)
    known = inputs.clusters

    reach = _weight_reach(base.get("replicaScheduling"))
    try:
        groups = _groups(base, known, reach)
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

    zones = {n: (c.grid_zone if (c := known.get(n)) else None) for n in candidates}
    data = lookup(zones, inputs.table)
    decision.warnings.extend(data.warnings())
    new = dict(base)
    user_terms = bool(base.get("clusterAffinities"))
    shape = _Shape(
        spread=_Spread.of(base.get("spreadConstraints")),
        overflow=_has_overflow(base.get("clusterAffinities")),
        reach=reach,
        # Open: the selection matches clusters by selectors (or every cluster), so clusters
        # carbonshift does not know, or that join later, must stay reachable.
        opened=_open_selection(base) and (reach is None or any(map(is_open, reach))),
        known=known,
        unweighted=_unweighted_terms(base, known, reach),
    )
    limits = _Limits(user_terms and not override, groups, shape.spread, known, reach is not None)
    intensities = _apply_limit(new, dict(data.values), knobs.max_intensity, limits, notes)
    tiers, weights, others = _place(
        new, intensities, knobs, shape, user_terms, weighting=inputs.weighting, notes=notes
    )

    changes = _diff(current, new)
    proposal = _Proposal(previous, current, new, weights, data.values)
    if changes and proposal.keep(inputs, warn):
        decision.record = previous
        return decision
    body = data.body(weights) | notes.body(others)
    for k, tier in enumerate(tiers):
        for name in tier:
            body["clusters"][name]["t"] = k
    # When this placement came into force: the data time of the decision that made it
    # (deterministic for given inputs, so identical reviews get identical answers).
    body["since"] = (not changes and previous.body.get("since")) or body["at"]
    decision.record = _record(base, new, body | history(previous))
    decision.changes = changes
    return decision


@dataclasses.dataclass(frozen=True, slots=True)
class _Shape:
    """What in the user's policy bounds what carbonshift may write."""

    spread: _Spread
    overflow: bool
    reach: list[Mapping[str, Any]] | None
    """The user's static weight targets (Karmada's reach), None: no user static weights."""
    opened: bool
    known: Mapping[str, ClusterConfig]
    unweighted: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """Open user terms none of whose known clusters has a user static weight: Karmada
    weighs all their clusters 1, so their unknown clusters stay reachable too."""

    def fill(
        self,
        placement: dict[str, Any],
        intensities: Mapping[str, float | None],
        first: int | None,
    ) -> Tiers:
        """Ordered fill: one term, the greenest tier inline, the others as overflow tiers.

        ``first``: how many clusters share the first tier (``max-clusters``; default:
        the greenest, with any equally green). Each tier keeps the user's selectors; an
        open selection ends in a tier for the clusters carbonshift does not know.
        Returns the tiers written, greenest first.
        """
        tiers = fill_order(intensities, first)
        affinity = placement.get("clusterAffinity") or {}
        selectors = {k: affinity[k] for k in _SELECTOR_KEYS if affinity.get(k)}
        term: dict[str, Any] = {"affinityName": GREEN_TERM, **selectors, "clusterNames": tiers[0]}
        overflow = [
            {"affinityName": f"{TIER_TERM}{k}", **selectors, "clusterNames": names}
            for k, names in enumerate(tiers[1:], 1)
        ]
        if self.opened:
            named = {n for t in tiers for n in t} | set(selectors.get("exclude") or [])
            overflow.append({"affinityName": OTHERS_TERM, **selectors, "exclude": sorted(named)})
        if overflow:
            term["overflowAffinities"] = overflow
        placement["clusterAffinities"] = [term]
        placement.pop("clusterAffinity", None)
        placement["replicaScheduling"] = _dynamic(placement.get("replicaScheduling"))
        return tiers

    def green_first(
        self, placement: dict[str, Any], order: list[str], n: int, notes: _Notes
    ) -> bool:
        """Green-first ``clusterAffinities`` (``max-clusters``); True when written."""
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
            rest = [*rest, *(n for n in _named(placement) if n not in order)]
        terms = _green_first(placement, order[:size], rest, opened=self.opened)
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
    weighting: WeightingConfig,
    notes: _Notes,
) -> tuple[Tiers, dict[str, int] | None, int | None]:
    """Write the ordered fill, or else green-first terms and carbon weights.

    Returns the fill's tiers (empty: not written), the static weights and the catch-all
    weight (:func:`_apply_weights`).
    """
    if _wants_fill(placement.get("replicaScheduling"), knobs, shape, user_terms, notes):
        return shape.fill(placement, intensities, knobs.max_clusters), None, None
    green = False
    if knobs.max_clusters is not None:
        if user_terms and not knobs.override:
            notes.leave(MAX_CLUSTERS, "the policy has its own clusterAffinities")
        else:
            order = order_greenest(intensities)
            green = shape.green_first(placement, order, knobs.max_clusters, notes)
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
    if not _wants_weights(scheduling, knobs.strategies, notes):
        return None, None
    rule = "carbon weights"
    if shape.spread.present:
        notes.leave(rule, "Karmada would ignore spreadConstraints under static weights")
        return None, None
    if shape.overflow:
        notes.leave(rule, "overflowAffinities need dynamicWeight or Aggregated division")
        return None, None
    blocker = _weight_blocker(scheduling)
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
        placement["replicaScheduling"] = _weighted(scheduling, weights, [], 0)
        return weights, None
    # Clusters the selection matches that carbonshift does not know weigh as unknown
    # intensity does (neutral); without an entry Karmada would give them no replicas.
    every = carbon_weights(
        {**intensities, _OTHERS: None}, exponent=weighting.exponent, scale=weighting.scale
    )
    others = every.pop(_OTHERS)
    named = sorted(every)
    catch_all = [
        {**t, "exclude": sorted(set(t.get("exclude") or []) | set(named))} for t in targets
    ]
    placement["replicaScheduling"] = _weighted(scheduling, every, catch_all, others)
    return every, others


# --- hysteresis ------------------------------------------------------------------------


def in_force(
    placement: Mapping[str, Any], weights: Mapping[str, int] | None
) -> dict[str, int] | None:
    """A placement as the hysteresis compares it: weights on the clusters Karmada uses.

    With a green-first term, that term's clusters (Karmada tries it first; with static
    weights it never fails) at their static weights, else weight 1; without one, the
    static weights. None: neither.
    """
    tiers = fill_tiers(placement)
    if tiers:
        # Karmada fills the tiers in order: each weighs twice the next (from the tenth on, 1).
        return {n: 2 ** max(0, _TIER_DEPTH - k) for k, tier in enumerate(tiers) for n in tier}
    for term in placement.get("clusterAffinities") or []:
        if isinstance(term, dict) and term.get("affinityName") == GREEN_TERM:
            names = term.get("clusterNames") or []
            known = weights or {}
            weighted = {n: known[n] for n in names if n in known}
            return weighted or dict.fromkeys(names, 1)
    return dict(weights) if weights else None


def fill_order(intensities: Mapping[str, float | None], first: int | None = None) -> Tiers:
    """Candidates in tiers, greenest first; equally green clusters share a tier.

    ``first``: the greenest ``first`` clusters share the first tier (``max-clusters``).
    Clusters of unknown intensity come last, together.
    """
    order = order_greenest(intensities)
    tiers: Tiers = [order[:first]] if first else []
    for name in order[len(tiers[0]) if tiers else 0 :]:
        last = tiers[-1][-1] if tiers and (len(tiers) > 1 or not first) else None
        if last is not None and intensities[last] == intensities[name]:
            tiers[-1].append(name)
        else:
            tiers.append([name])
    return [t for t in tiers if t]


def fill_tiers(placement: Mapping[str, Any]) -> Tiers | None:
    """The ordered-fill tiers carbonshift wrote into a placement (named clusters only);
    None when the placement is not an ordered fill."""
    for term in placement.get("clusterAffinities") or []:
        if not isinstance(term, dict) or term.get("affinityName") != GREEN_TERM:
            continue
        overflow = term.get("overflowAffinities")
        if overflow is None and len(placement.get("clusterAffinities") or []) == 1:
            scheduling = placement.get("replicaScheduling")
            preference = (
                scheduling.get("weightPreference") if isinstance(scheduling, dict) else None
            )
            if not (isinstance(preference, dict) and preference.get("staticWeightList")):
                overflow = []  # every candidate equally green: one tier
        if not isinstance(overflow, list):
            return None
        named = [o for o in overflow if isinstance(o, dict) and o.get("clusterNames")]
        return [list(term.get("clusterNames") or []), *(list(o["clusterNames"]) for o in named)]
    return None


def _hours(when: datetime) -> float:
    return when.timestamp() / 3600


@dataclasses.dataclass(frozen=True, slots=True)
class _Proposal:
    """The placement in force (as recorded) against a freshly computed one."""

    previous: Record
    current: Mapping[str, Any]
    new: Mapping[str, Any]
    weights: Mapping[str, int] | None
    intensities: Mapping[str, float | None]

    def keep(self, inputs: PolicyInputs, warn: Warn) -> bool:
        """True when the placement in force stays (:func:`hysteresis.judge`).

        Only a placement carbonshift itself put in force (recorded ``since``, fields
        still as written) is held; user edits and first decisions always go through.
        """
        previous, since = self.previous, self.previous.body.get("since")
        if inputs.now is None or not isinstance(since, str) or not previous.own:
            return False
        if not all(previous.owns(k, self.current.get(k[len(_OWN) :])) for k in previous.own):
            return False
        try:
            started = _hours(vocabulary.parse_time(since))
        except ValueError:
            return False
        clusters = previous.body.get("clusters") or {}
        recorded = {n: c.get("w") for n, c in clusters.items() if isinstance(c, dict)}
        held = in_force(self.current, {n: w for n, w in recorded.items() if isinstance(w, int)})
        proposed = in_force(self.new, self.weights) or {}
        rule, now = inputs.hysteresis, _hours(inputs.now)
        record = Held(held, started) if held else None
        verdict = judge(rule, record, proposed, self.intensities, now)
        if verdict is Verdict.DWELL:
            hours = now - started
            warn(f"carbonshift: placement kept: in force {hours:.1f} h of {rule.dwell_hours:g} h")
        elif verdict is Verdict.MARGIN:
            warn(f"carbonshift: placement kept: new one is not {rule.margin:.0%} greener")
        return verdict.keeps


# --- steps -----------------------------------------------------------------------------


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


def _apply_limit(
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
    _exclude(placement, dropped)
    return {n: v for n, v in intensities.items() if n not in dropped}


def _groups(
    placement: Mapping[str, Any],
    known: Mapping[str, ClusterConfig],
    reach: list[Mapping[str, Any]] | None,
) -> list[list[str]]:
    """The candidates of each affinity term (with its overflow), or of the one affinity.

    Only clusters within the user's static weights' reach, when there are any.
    Empty when no candidate has a user weight.
    """
    terms = placement.get("clusterAffinities")
    if terms:
        if not isinstance(terms, list) or not all(isinstance(t, dict) for t in terms):
            raise SelectorError("clusterAffinities must be a list of objects")
        groups = [
            sorted({n for a in (t, *_overflow(t)) for n in allowed_clusters(a, known)})
            for t in terms
        ]
    else:
        groups = [allowed_clusters(placement.get("clusterAffinity"), known)]
    if reach is None:
        return groups
    within = {n for target in reach for n in allowed_clusters(target, known)}
    if within.isdisjoint(n for g in groups for n in g):
        return []  # the weights may name clusters carbonshift does not know: leave it
    # A term none of whose clusters has a weight gives each of them weight 1 (Karmada).
    return [[n for n in g if n in within] or g for g in groups]


def _overflow(term: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    extra = term.get("overflowAffinities")
    if extra is None:
        return []
    if not isinstance(extra, list) or not all(isinstance(o, dict) for o in extra):
        raise SelectorError("overflowAffinities must be a list of objects")
    return extra


def _has_overflow(terms: object) -> bool:
    return isinstance(terms, list) and any(
        isinstance(t, dict) and t.get("overflowAffinities") is not None for t in terms
    )


def _open_selection(placement: Mapping[str, Any]) -> bool:
    """True when the policy selects clusters by selectors or selects every cluster."""
    terms = placement.get("clusterAffinities")
    if terms:
        return any(is_open(a) for t in terms for a in (t, *_overflow(t)))
    return is_open(placement.get("clusterAffinity"))


def _unweighted_terms(
    placement: Mapping[str, Any],
    known: Mapping[str, ClusterConfig],
    reach: list[Mapping[str, Any]] | None,
) -> list[dict[str, Any]]:
    """The selectors of open user terms whose known clusters have no user static weight."""
    terms = placement.get("clusterAffinities")
    if reach is None or not isinstance(terms, list):
        return []
    within = {n for target in reach for n in allowed_clusters(target, known)}
    out = []
    for term in terms:
        open_ = isinstance(term, dict) and is_open(term)
        if open_ and within.isdisjoint(allowed_clusters(term, known)):
            keys = (*_SELECTOR_KEYS, "clusterNames")
            out.append({k: term[k] for k in keys if term.get(k)})
    return out


def _weight_reach(scheduling: object) -> list[Mapping[str, Any]] | None:
    """The user's static weight targets when Karmada divides by them, else None.

    Karmada gives a cluster that matches no ``staticWeightList`` entry no replicas, so
    the list bounds where replicas can go (``getStaticWeightInfoList``).
    """
    if not isinstance(scheduling, dict):
        return None
    if scheduling.get("replicaSchedulingType", "Divided") != "Divided":
        return None
    if scheduling.get("replicaDivisionPreference") == "Aggregated":
        return None
    preference = scheduling.get("weightPreference")
    if not isinstance(preference, dict) or preference.get("dynamicWeight"):
        return None
    entries = preference.get("staticWeightList")
    if not isinstance(entries, list) or not entries:
        return None
    return [
        e["targetCluster"]
        for e in entries
        if isinstance(e, dict) and isinstance(e.get("targetCluster"), dict)
    ]


def _named(placement: Mapping[str, Any]) -> list[str]:
    """The clusters the user's ``clusterAffinity`` names, minus its ``exclude``."""
    affinity = placement.get("clusterAffinity")
    if not isinstance(affinity, Mapping):
        return []
    names, out = affinity.get("clusterNames"), set(affinity.get("exclude") or [])
    return (
        [n for n in names if isinstance(n, str) and n not in out] if isinstance(names, list) else []
    )


def _exclude(placement: dict[str, Any], names: list[str]) -> None:
    def without(affinity: Mapping[str, Any]) -> dict[str, Any]:
        return {**affinity, "exclude": sorted(set(affinity.get("exclude") or []) | set(names))}

    terms = placement.get("clusterAffinities")
    if terms:
        out = []
        for term in terms:
            changed = without(term)
            if changed.get("overflowAffinities"):
                changed["overflowAffinities"] = [without(o) for o in changed["overflowAffinities"]]
            out.append(changed)
        placement["clusterAffinities"] = out
        return
    placement["clusterAffinity"] = without(placement.get("clusterAffinity") or {})


def _green_first(
    placement: Mapping[str, Any], green: list[str], rest: list[str], *, opened: bool
) -> list[dict[str, Any]]:
    """Ordered terms: the greenest, then the fallback, each keeping the user's selectors.

    The fallback is ``rest`` by name when the user named the clusters; for an open
    selection it is the user's selection itself (no names), so clusters carbonshift does
    not know still match. The user's own terms (override) follow the greenest one as they
    are.
    """
    terms = placement.get("clusterAffinities")
    if terms:
        first = {"affinityName": GREEN_TERM, "clusterNames": green}
        return [first, *(t for t in terms if t.get("affinityName") != GREEN_TERM)]
    affinity = placement.get("clusterAffinity") or {}
    selectors = {k: affinity[k] for k in _SELECTOR_KEYS if affinity.get(k)}
    out = [{"affinityName": GREEN_TERM, **selectors, "clusterNames": green}]
    if opened:
        out.append({"affinityName": FALLBACK_TERM, **selectors})
    elif rest:
        out.append({"affinityName": FALLBACK_TERM, **selectors, "clusterNames": rest})
    return out


def _wants_fill(
    scheduling: object, knobs: Knobs, shape: _Shape, user_terms: bool, notes: _Notes
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
        return ordered and _by_room(scheduling) and not blocked
    kind = (
        scheduling.get("replicaSchedulingType", "Divided") if isinstance(scheduling, dict) else None
    )
    if kind != "Divided":
        if "fill" not in names:
            return False
        if kind == "Duplicated":
            notes.leave(FILL, "Duplicated gives every cluster all replicas; set Divided")
            return False
        # No replicaScheduling: written as Divided, unless something below keeps it out.
    reason = None
    if user_terms:
        reason = "the policy has its own clusterAffinities"
    elif shape.spread.present:
        reason = "spreadConstraints choose the clusters"
    elif shape.reach is not None:
        reason = "the policy's own static weights bound where replicas go"
    if reason is not None:
        notes.leave(FILL, reason + "; carbon weights instead" if shape.reach is None else reason)
        return False
    return True


def _by_room(scheduling: object) -> bool:
    """Whether Karmada divides ``scheduling`` by room (Divided by ``dynamicWeight:
    AvailableReplicas``, or Aggregated): what ``overflowAffinities`` need."""
    if not isinstance(scheduling, dict):
        return False
    if scheduling.get("replicaSchedulingType", "Divided") != "Divided":
        return False
    if scheduling.get("replicaDivisionPreference") == "Aggregated":
        return True
    preference = scheduling.get("weightPreference")
    return isinstance(preference, dict) and preference.get("dynamicWeight") == "AvailableReplicas"


def _dynamic(scheduling: object) -> dict[str, Any]:
    """Divided by available replicas (the user's Aggregated division stays: it overflows too)."""
    out = dict(scheduling) if isinstance(scheduling, dict) else {}
    out["replicaSchedulingType"] = "Divided"
    if out.get("replicaDivisionPreference") == "Aggregated":
        out.pop("weightPreference", None)
        return out
    out["replicaDivisionPreference"] = "Weighted"
    out["weightPreference"] = {"dynamicWeight": "AvailableReplicas"}
    return out


def _wants_weights(scheduling: object, names: frozenset[str], notes: _Notes) -> bool:
    if "none" in names:
        return False
    kind = None
    if isinstance(scheduling, dict):
        kind = scheduling.get("replicaSchedulingType", "Divided")
    if kind == "Divided":
        return True
    if "weighted" in names:
        if kind == "Duplicated":
            notes.leave(
                "carbon weights", "Duplicated gives every cluster all replicas; set Divided"
            )
            return False
        return True
    return False


def _weight_blocker(scheduling: object) -> str | None:
    if not isinstance(scheduling, dict):
        return None
    preference = scheduling.get("weightPreference") or {}
    if preference.get("dynamicWeight"):
        return "the policy uses dynamicWeight"
    if preference.get("staticWeightList"):
        return "the policy's own static weights are kept"
    if scheduling.get("replicaDivisionPreference") == "Aggregated":
        return "the policy uses Aggregated division"
    return None


def _weighted(
    scheduling: object,
    weights: Mapping[str, int],
    others: list[dict[str, Any]],
    other_weight: int,
) -> dict[str, Any]:
    out = dict(scheduling) if isinstance(scheduling, dict) else {}
    out["replicaSchedulingType"] = "Divided"
    out["replicaDivisionPreference"] = "Weighted"
    ranked = sorted(weights, key=lambda n: (-weights[n], n))
    entries: list[dict[str, Any]] = [
        {"targetCluster": {"clusterNames": [n]}, "weight": weights[n]} for n in ranked
    ]
    entries += [{"targetCluster": t, "weight": other_weight} for t in others]
    out["weightPreference"] = {"staticWeightList": entries}
    return out


def _record(base: Mapping[str, Any], new: Mapping[str, Any], body: dict[str, Any]) -> Record:
    record = Record(body=body)
    for field in set(base) | set(new):
        if base.get(field) != new.get(field):
            record.orig[_OWN + field] = base.get(field)
            record.own[_OWN + field] = fingerprint(new.get(field))
    return record


def _diff(current: Mapping[str, Any], new: Mapping[str, Any]) -> list[Change]:
    changes = []
    for field in sorted(set(current) | set(new)):
        if field not in new:
            changes.append(Change(("spec", "placement", field), REMOVE))
        elif current.get(field) != new[field]:
            changes.append(Change(("spec", "placement", field), new[field]))
    return changes
