"""How the leader follows a (Cluster)PropagationPolicy after creation: its parts of the
one re-evaluation step (:func:`webhook.decision.follow.step`). Stale data anywhere in
the held or the proposed placement writes nothing; a switch is scored by the expected
intensity of the placement in force and of the proposal (weights, or the ordered fill's
tiers, :func:`webhook.decision.karmada.holding.in_force`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.decision.follow import Inputs, Judged, Rules, Switch, apply, rounded, show
from webhook.decision.hysteresis import Hysteresis, expected_intensity
from webhook.decision.karmada.holding import in_force
from webhook.decision.karmada.pruning import dropped
from webhook.decision.outcome import Change, Decision, Path, iso
from webhook.decision.record import Record, with_switch
from webhook.model.objects import dig, meta_of
from webhook.model.vocabulary import DECISION

POLICY_FIELDS: Mapping[str, Path] = {"placement.": ("spec", "placement")}
"""Record key prefix -> where those fields live in a (Cluster)PropagationPolicy."""


def _policy_judge(obj: Mapping[str, Any], previous: Record, inputs: Inputs) -> Judged:
    decision = inputs.decide(obj)
    new = decision.record
    stale = _stale(previous, new, inputs)
    if stale:
        return Judged(decision, f"stale intensity data for {', '.join(stale)}: nothing written")
    held = in_force(_placement(obj), _weights(previous))
    intensities = _intensities(new if new is not None else previous)
    before = expected_intensity(held, intensities) if held else None
    return Judged(decision, before=before)


def _policy_kept(decision: Decision) -> str:
    kept = [w for w in decision.warnings if "placement kept" in w]
    return kept[0].removeprefix("carbonshift: ") if kept else "the placement in force stays"


def _policy_switch(
    obj: Mapping[str, Any], changes: list[Change], record: Record, judged: Judged, inputs: Inputs
) -> Switch:
    previous = Record.decode(meta_of(obj).annotations.get(DECISION))
    new = judged.decision.record
    assert new is not None  # a switch has a new record
    intensities = _intensities(new)
    held = in_force(_placement(obj), _weights(previous))
    proposed = in_force(_placement(apply(obj, changes)), _weights(new))
    after = expected_intensity(proposed, intensities)
    before = judged.before
    entry = {
        "t": iso(inputs.now),
        "from": held,
        "to": proposed,
        "before": rounded(before),
        "after": rounded(after),
    }
    return Switch(with_switch(record, entry), _why(before, after, inputs.hysteresis), after)


def _policy_dropped(obj: Mapping[str, Any], previous: Record) -> Mapping[str, str]:
    return dropped(_placement(obj), previous)


POLICY_RULES = Rules(
    judge=_policy_judge,
    writes=lambda _change: True,
    kept=_policy_kept,
    switch=_policy_switch,
    dropped=_policy_dropped,
)
"""A (Cluster)PropagationPolicy's: stale data anywhere in the held or proposed placement
writes nothing; the switch is scored by expected intensity; ``overflowAffinities`` an
older Karmada API pruned are the API server's doing (:mod:`webhook.decision.karmada.pruning`)."""


def _intensities(record: Record) -> dict[str, float | None]:
    """``{name: facts.intensity for name, facts in record.clusters.items()}``."""
    return {str(name): _intensity(entry) for name, entry in record.entries.items()}


def _intensity(entry: object) -> float | None:
    """``ClusterFacts.of(entry).intensity``."""
    if type(entry) is not dict and not isinstance(entry, Mapping):
        return None
    g = entry.get("g")
    if type(g) is float:
        return g
    return float(g) if isinstance(g, int | float) and not isinstance(g, bool) else None


def _weights(record: Record) -> dict[str, int]:
    weights = {str(name): _weight(entry) for name, entry in record.entries.items()}
    return {n: w for n, w in weights.items() if w is not None}


def _weight(entry: object) -> int | None:
    """``ClusterFacts.of(entry).weight``."""
    if type(entry) is not dict and not isinstance(entry, Mapping):
        return None
    w = entry.get("w")
    return w if isinstance(w, int) and not isinstance(w, bool) else None


def _stale(previous: Record, new: Record | None, inputs: Inputs) -> list[str]:
    """Clusters of the held or proposed placement whose reading is stale or missing."""
    names = {str(name) for name in previous.entries}
    if new is not None:
        names.update(str(name) for name in new.entries)
    clusters, table = inputs.clusters, inputs.table
    out = []
    for name in names:
        cluster = clusters.get(name)
        zone = cluster.grid_zone if cluster is not None else None
        if zone is None:
            continue  # no grid zone: unknown for good, the decider weighs it neutrally
        reading = table.get(zone)
        if reading is None or reading.stale:  # no data yet counts as stale
            out.append(name)
    return sorted(out)


def _placement(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    found = dig(obj, "spec", "placement")
    return found if type(found) is dict or isinstance(found, Mapping) else {}


def _why(before: float | None, after: float | None, rule: Hysteresis) -> str:
    shown = f"{show(before)} -> {show(after)} gCO2eq/kWh"
    if before and after is not None:
        better = 1 - after / before
        return (
            f"expected intensity {shown}: {better:.0%} greener than the placement in force"
            f" (margin {rule.margin:.0%}, dwell {rule.dwell_hours:g} h passed)"
        )
    return f"expected intensity {shown}: the grid moved (dwell {rule.dwell_hours:g} h passed)"
