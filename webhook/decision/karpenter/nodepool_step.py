"""Re-evaluating a managed NodePool: pause, resume or re-weight it as the grid moves.

NodePools follow the rules of :func:`webhook.decision.follow.step` with their own decider
(:func:`webhook.decision.karpenter.nodepool.reevaluate`: only ``spec.limits`` and ``spec.weight``
change) and two differences, both so a pause never outlasts its promise: a resume (the
user's limits back, at the cleaner hour or at ``max-pause``) is written even on stale or
missing data (decided without the reading, so only ``max-pause`` ends it then) and is never
``too_soon``. The action says whether the pool was ``paused`` or ``resumed``.

Pure: data in, action out; the caller reads the clock and writes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from webhook.decision import follow, pause
from webhook.decision.follow import (
    Action,
    Inputs,
    Judged,
    PauseEvent,
    Rules,
    Switch,
    apply,
    rounded,
    show,
)
from webhook.decision.forecast import best_start
from webhook.decision.outcome import Change, Decision, Path, iso
from webhook.decision.record import Record, with_switch
from webhook.model import vocabulary
from webhook.model.objects import dig, meta_of
from webhook.model.vocabulary import DECISION, REASON

NODEPOOL_FIELDS: Mapping[str, Path] = {
    "spec.": ("spec",),
    "template.": ("spec", "template", "spec"),
}
"""Record key prefix -> where those fields live in a NodePool."""
NODEPOOL_WRITES = (
    ("spec", "limits"),
    ("spec", "weight"),
    ("metadata", "annotations", DECISION),
    ("metadata", "annotations", REASON),
)
"""Everything the re-evaluation may change in a NodePool."""


def _judge(obj: Mapping[str, Any], _previous: Record, inputs: Inputs) -> Judged:
    """Decide without a stale local reading: only a resume may then be written."""
    if inputs.decide_on is None:  # pragma: no cover - the reevaluator always binds it
        raise ValueError("the NodePool step needs inputs.decide_on")
    zone = inputs.zone
    reading = inputs.table.get(zone) if zone else None
    stale = zone is not None and (reading is None or reading.stale)
    table = {z: r for z, r in inputs.table.items() if z != zone} if stale else inputs.table
    decision = inputs.decide_on(obj, table)
    new = decision.record
    resuming = paused(obj) and new is not None and not new.paused
    if stale and not resuming:
        return Judged(decision, f"stale intensity data for {zone}: nothing written")
    return Judged(decision, before=reading.value if reading is not None and not stale else None)


def _kept(decision: Decision) -> str:
    return _pause_why(decision.warnings) or "nothing to change"


def _switch(
    obj: Mapping[str, Any], changes: list[Change], record: Record, judged: Judged, inputs: Inputs
) -> Switch:
    previous = Record.decode(meta_of(obj).annotations.get(DECISION))
    new = judged.decision.record
    assert new is not None  # a switch has a new record
    was = paused(obj)
    limits = any(c.path == ("spec", "limits") for c in changes)
    event: PauseEvent | None = None
    stepped = new.step != previous.step  # strategy ladder
    if limits and new.paused and (not was or stepped):
        event = "paused"
    elif limits and was and not new.paused:
        event = "resumed"
    g = judged.before
    record, why = _nodepool_switch(obj, changes, record, g=g, event=event, inputs=inputs)
    if event == "paused":
        why = _paused_why(obj, inputs, g, apply(obj, tuple(changes)), new.step)
    elif event == "resumed":
        why = f"{_pause_why(judged.decision.warnings) or event} ({inputs.zone} at {show(g)} g/kWh)"
    return Switch(record, why, pause=event)


RULES = Rules(
    judge=_judge,
    writes=lambda change: change.path in NODEPOOL_WRITES,
    kept=_kept,
    switch=_switch,
    urgent=lambda switch: switch.pause == "resumed",
    steady=False,
)
"""A NodePool's: a resume is written even on stale data and never too soon."""


def step(obj: Mapping[str, Any], inputs: Inputs) -> Action:
    """What the re-evaluation does with the stored NodePool ``obj`` now (module doc)."""
    return follow.step(obj, inputs, RULES)


def paused(obj: Mapping[str, Any]) -> bool:
    """True while carbonshift holds the NodePool paused (its limits are still the ones
    carbonshift wrote and the decision annotation says ``paused``)."""
    record = Record.decode(meta_of(obj).annotations.get(DECISION))
    limits = dig(obj, "spec", "limits")
    return record.paused and record.owns("spec.limits", limits)


def _nodepool_switch(
    obj: Mapping[str, Any],
    changes: list[Change],
    record: Record,
    *,
    g: float | None,
    event: PauseEvent | None,
    inputs: Inputs,
) -> tuple[Record, str]:
    """The record with this write in ``switches``, and the weight change in words."""
    old_w = dig(obj, "spec", "weight")
    new_w = dig(apply(obj, changes), "spec", "weight")
    entry: dict[str, Any] = {"t": iso(inputs.now), "g": rounded(g)}
    if event is not None:
        entry["pause"] = event
    if old_w != new_w:
        entry["from"], entry["to"] = {"weight": old_w}, {"weight": new_w}
    why = f"spec.weight {_show_w(old_w)} -> {_show_w(new_w)}: {inputs.zone} at {show(g)} g/kWh"
    return with_switch(record, entry), why


def _pause_why(warnings: Sequence[str]) -> str | None:
    for w in warnings:
        for prefix in ("carbonshift: pause: ", "carbonshift: ladder: "):
            if w.startswith(prefix):
                return w.removeprefix(prefix)
    return None


def _paused_why(
    obj: Mapping[str, Any], inputs: Inputs, g: float | None, new: Mapping[str, Any], step: object
) -> str:
    """``limits.cpu "0", no new nodes: DE is at 450 g/kWh (class high); cleaner hour
    15:00Z in 2 h, ~200 g/kWh forecast; max-pause 24h``; a ladder step (``step``, the
    share) says its limit: ``limits.cpu "100" (50 % of the user's limit): ...``."""
    limit = vocabulary.knobs(meta_of(obj).annotations, "nodepool").max_pause
    at = f"{inputs.zone} is at {show(g)} g/kWh"
    if isinstance(step, int | float):
        cpu = dig(new, "spec", "limits", "cpu")
        why = f'limits.cpu "{cpu}" ({step:.0%} of the user\'s limit): {at}'
    else:
        why = f'limits.cpu "0", no new nodes: {at} (class high)'
    series = inputs.outlook
    ahead = best_start(series, 1, limit // pause.HOUR) if series else 0
    if series and ahead > 0:
        hour = inputs.now.replace(minute=0, second=0, microsecond=0) + ahead * pause.HOUR
        why += (
            f"; cleaner hour {hour.strftime('%H:%MZ')} in {ahead} h,"
            f" ~{series[ahead]:.0f} g/kWh forecast"
        )
    elif not series:
        why += "; no forecast"
    return f"{why}; max-pause {pause.duration(limit)}"


def _show_w(value: object) -> str:
    return "unset" if value is None else str(value)
