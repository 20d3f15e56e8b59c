"""Carbon-based placement for Karmada PropagationPolicy / ClusterPropagationPolicy.

Given the policy object, the known member clusters and the in-memory intensities,
decide (see README "Annotations"):

- candidates: the clusters the policy already allows (never more);
- ``carbonshift.io/max-intensity``: exclude candidates above the limit;
- ``carbonshift.io/max-clusters``: ordered ``clusterAffinities``, greenest N first;
- Divided policies (or ``carbonshift.io/strategy: weighted``): a static weight list.

Fields the user set are never overwritten unless ``carbonshift.io/override: "true"``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from webhook import vocabulary
from webhook.config import ClusterConfig, WeightingConfig
from webhook.decision.hysteresis import Held, Hysteresis, Verdict, judge
from webhook.decision.outcome import REMOVE, Change, Decision, lookup, short
from webhook.decision.ranking import carbon_weights, order_greenest, within_limit
from webhook.decision.record import Record, fingerprint, user_view
from webhook.decision.selectors import SelectorError, allowed_clusters
from webhook.intensity import IntensityTable
from webhook.vocabulary import DECISION, MAX_CLUSTERS, MAX_INTENSITY, Knobs

GREEN_TERM = "carbonshift-greenest"
FALLBACK_TERM = "carbonshift-fallback"
_OWN = "placement."
_SELECTOR_KEYS = ("labelSelector", "fieldSelector", "exclude")

Warn = Callable[[str], None]


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
    warn = decision.warnings.append
    decision.warnings.extend(vocabulary.warning(p) for p in knobs.problems)

    try:
        candidates = _candidates(base, inputs.clusters)
    except SelectorError as exc:
        decision.skipped = f"placement not understood: {exc}"
        warn(short(f"carbonshift: {decision.skipped}"))
        return decision
    if not candidates:
        decision.skipped = "no candidate clusters known; list them under clusters: in the config"
        warn(short(f"carbonshift: {decision.skipped}"))
        return decision

    zones = {n: (c.grid_zone if (c := inputs.clusters.get(n)) else None) for n in candidates}
    data = lookup(zones, inputs.table)
    decision.warnings.extend(data.warnings())
    intensities = dict(data.values)
    new = dict(base)
    user_terms = bool(base.get("clusterAffinities"))

    intensities = _apply_limit(
        new, intensities, knobs.max_intensity, user_terms and not override, warn
    )

    max_clusters = knobs.max_clusters
    if max_clusters is not None:
        if user_terms and not override:
            warn(f"carbonshift: clusterAffinities set by user; {MAX_CLUSTERS} not applied")
        else:
            new["clusterAffinities"] = _green_first(new, order_greenest(intensities), max_clusters)
            new.pop("clusterAffinity", None)

    weights = _apply_weights(new, intensities, knobs, weighting=inputs.weighting, warn=warn)

    changes = _diff(current, new)
    proposal = _Proposal(previous, current, new, weights, data.values)
    if changes and proposal.keep(inputs, warn):
        decision.record = previous
        return decision
    body = data.body(weights)
    # When this placement came into force: the data time of the decision that made it
    # (deterministic for given inputs, so identical reviews get identical answers).
    body["since"] = (not changes and previous.body.get("since")) or body["at"]
    decision.record = _record(base, new, body)
    decision.changes = changes
    return decision


def _apply_weights(
    placement: dict[str, Any],
    intensities: Mapping[str, float | None],
    knobs: Knobs,
    *,
    weighting: WeightingConfig,
    warn: Warn,
) -> dict[str, int] | None:
    """Static carbon weights for Divided policies; returns them (None: not applied)."""
    scheduling = placement.get("replicaScheduling")
    if not _wants_weights(scheduling, knobs.strategies, warn):
        return None
    blocker = _weight_blocker(scheduling)
    if blocker and not knobs.override:
        warn(f"carbonshift: {blocker} set by user; carbon weights not applied")
        return None
    weights = carbon_weights(intensities, exponent=weighting.exponent, scale=weighting.scale)
    placement["replicaScheduling"] = _weighted(scheduling, weights)
    return weights


# --- hysteresis ------------------------------------------------------------------------


def in_force(
    placement: Mapping[str, Any], weights: Mapping[str, int] | None
) -> dict[str, int] | None:
    """A placement as the hysteresis compares it: weights on the clusters Karmada uses.

    With a green-first term, that term's clusters (Karmada tries it first; with static
    weights it never fails) at their static weights, else weight 1; without one, the
    static weights. None: neither. The simulator compares placements through this too.
    """
    for term in placement.get("clusterAffinities") or []:
        if isinstance(term, dict) and term.get("affinityName") == GREEN_TERM:
            names = term.get("clusterNames") or []
            known = weights or {}
            weighted = {n: known[n] for n in names if n in known}
            return weighted or dict.fromkeys(names, 1)
    return dict(weights) if weights else None


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
        """True when the placement in force stays (:func:`hysteresis.step`'s rule).

        Only a placement carbonshift itself put in force (recorded ``since``, fields
        still as written) is held; user edits and first decisions always go through.
        """
        previous, since = self.previous, self.previous.body.get("since")
        if inputs.now is None or not isinstance(since, str) or not previous.own:
            return False
        if not all(previous.owns(k, self.current.get(k[len(_OWN) :])) for k in previous.own):
            return False
        try:
            started = _hours(datetime.fromisoformat(since.replace("Z", "+00:00")))
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


def _apply_limit(
    placement: dict[str, Any],
    intensities: dict[str, float | None],
    limit: float | None,
    blocked: bool,
    warn: Warn,
) -> dict[str, float | None]:
    """Exclude candidates above ``max-intensity``; returns the remaining candidates."""
    if limit is None:
        return intensities
    kept, dropped = within_limit(intensities, limit)
    above = [n for n in kept if (v := intensities[n]) is not None and v > limit]
    if above:
        warn(short(f"carbonshift: every candidate is above {limit:g} g; keeping {above[0]}"))
    if not dropped:
        return intensities
    if blocked:
        warn(f"carbonshift: clusterAffinities set by user; {MAX_INTENSITY} not applied")
        return intensities
    _exclude(placement, dropped)
    return {n: intensities[n] for n in kept}


def _candidates(placement: Mapping[str, Any], known: Mapping[str, ClusterConfig]) -> list[str]:
    terms = placement.get("clusterAffinities")
    if terms:
        if not isinstance(terms, list):
            raise SelectorError("clusterAffinities must be a list")
        return sorted({n for term in terms for n in allowed_clusters(term, known)})
    return allowed_clusters(placement.get("clusterAffinity"), known)


def _exclude(placement: dict[str, Any], names: list[str]) -> None:
    terms = placement.get("clusterAffinities")
    if terms:
        placement["clusterAffinities"] = [
            {**t, "exclude": sorted(set(t.get("exclude") or []) | set(names))} for t in terms
        ]
        return
    affinity = dict(placement.get("clusterAffinity") or {})
    affinity["exclude"] = sorted(set(affinity.get("exclude") or []) | set(names))
    placement["clusterAffinity"] = affinity


def _green_first(placement: Mapping[str, Any], order: list[str], n: int) -> list[dict[str, Any]]:
    """Ordered terms: the N greenest, then the rest, each keeping the user's selectors."""
    affinity = placement.get("clusterAffinity") or {}
    selectors = {k: affinity[k] for k in _SELECTOR_KEYS if affinity.get(k)}
    terms = [{"affinityName": GREEN_TERM, **selectors, "clusterNames": order[:n]}]
    if order[n:]:
        terms.append({"affinityName": FALLBACK_TERM, **selectors, "clusterNames": order[n:]})
    return terms


def _wants_weights(scheduling: object, names: frozenset[str], warn: Warn) -> bool:
    if "none" in names:
        return False
    kind = None
    if isinstance(scheduling, dict):
        kind = scheduling.get("replicaSchedulingType", "Divided")
    if kind == "Divided":
        return True
    if "weighted" in names:
        if kind == "Duplicated":
            warn(
                "carbonshift: Duplicated policy: weights ignored; set replicaSchedulingType Divided"
            )
            return False
        return True
    return False


def _weight_blocker(scheduling: object) -> str | None:
    if not isinstance(scheduling, dict):
        return None
    preference = scheduling.get("weightPreference") or {}
    if preference.get("dynamicWeight"):
        return "dynamicWeight"
    if preference.get("staticWeightList"):
        return "weightPreference"
    if scheduling.get("replicaDivisionPreference") == "Aggregated":
        return "replicaDivisionPreference Aggregated"
    return None


def _weighted(scheduling: object, weights: Mapping[str, int]) -> dict[str, Any]:
    out = dict(scheduling) if isinstance(scheduling, dict) else {}
    out["replicaSchedulingType"] = "Divided"
    out["replicaDivisionPreference"] = "Weighted"
    ranked = sorted(weights, key=lambda n: (-weights[n], n))
    out["weightPreference"] = {
        "staticWeightList": [
            {"targetCluster": {"clusterNames": [n]}, "weight": weights[n]} for n in ranked
        ]
    }
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
