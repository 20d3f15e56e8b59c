"""Re-evaluating a managed object after creation: keep it, switch it, or leave it be.

The leader (:mod:`webhook.controllers.follower`) runs :func:`step` on every stored object
carbonshift manages (opted in as for admission, carrying ``carbonshift.io/decision``).
The step decides with the kind's own decider, the one admission calls on a refresh, so a
switch writes exactly what a refresh would, hysteresis and dwell included. Rules, first
match wins:

- ``skipped``: not opted in (any more), being deleted, or no decision annotation: not
  managed;
- ``stale``: a reading behind the held or the proposed placement is stale (or missing
  for a cluster whose grid zone is known): never write;
- ``dropped``: the API server stored a field carbonshift wrote without a part of it (a
  field its schema lacks, pruned: the kind's :attr:`Rules.dropped` says which); no user
  edited it: it stays carbonshift's and the object is decided again in a shape the API
  keeps, written at once (never ``too_soon``);
- ``user_owned``: a field carbonshift wrote was edited by someone else since: it is
  released (recorded under ``user`` in the annotation, never written again) and only the
  annotation is written, so the warning about it is given once;
- ``kept``: the decider proposes no change (identical, within the dwell, or not greener
  by the margin), or only changes to fields the user took back;
- ``too_soon``: a switch is due but the last write (the last recorded switch, else the
  object's creation) is less than ``min_interval_seconds`` ago;
- ``switched``: the changes plus the annotation, whose ``switches`` keeps the last five
  switches (time, from, to, expected intensity before and after).

One skeleton for every kind: what differs (how a kind decides and when its data is stale,
which changes it may write, what it says when kept or switched, which switch is urgent)
is the kind's :class:`Rules`, carried by its row; NodePools' are in
:mod:`webhook.decision.karpenter.nodepool_step`.

Pure: data in, action out; the caller reads the clock and writes.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

from webhook.decision import optin
from webhook.decision.hysteresis import NO_HYSTERESIS, Hysteresis
from webhook.decision.outcome import REMOVE, Change, Decision, Path, recorded
from webhook.decision.record import (
    Record,
    fingerprint,
    released,
    switches,
    user_fields,
)
from webhook.model import vocabulary
from webhook.model.config import ClusterConfig
from webhook.model.intensity import IntensityTable
from webhook.model.objects import EMPTY, meta_of
from webhook.model.vocabulary import DECISION

Outcome = Literal["skipped", "stale", "dropped", "user_owned", "kept", "too_soon", "switched"]

PauseEvent = Literal["paused", "resumed"]


@dataclasses.dataclass(frozen=True, slots=True)
class Inputs:
    """Everything a re-evaluation depends on besides the object."""

    decide: Callable[[Mapping[str, Any]], Decision]
    """The kind's decider with the decision context bound (``row.decide(obj, ctx)``)."""
    table: IntensityTable
    clusters: Mapping[str, ClusterConfig]
    now: datetime
    hysteresis: Hysteresis = NO_HYSTERESIS
    """The rule the decider applies (for the reason given with a switch)."""
    min_interval_seconds: float = 1800.0
    namespace_labels: Mapping[str, str] | None = None
    """Labels of the object's namespace (namespaced kinds); None: cluster-scoped."""
    fields: Mapping[str, Path] = dataclasses.field(default_factory=dict)
    """Record key prefix -> path of the fields with that prefix in the object."""
    zone: str | None = None
    """NodePools: the local grid zone (config ``zone``)."""
    decide_on: Callable[[Mapping[str, Any], IntensityTable], Decision] | None = None
    """NodePools: the decider on a given table (the step leaves out a stale reading)."""
    outlook: Sequence[float] | None = None
    """NodePools: the local zone's ``[now, now+1 h, ...]`` the decider was given, if any."""


@dataclasses.dataclass(frozen=True, slots=True)
class Action:
    """What to do with one object."""

    outcome: Outcome
    reason: str
    changes: tuple[Change, ...] = ()
    """What to write (the decision annotation included); empty: write nothing."""
    before: float | None = None
    """Expected intensity of the placement in force (gCO2eq/kWh, current intensities)."""
    after: float | None = None
    """Expected intensity of the new placement (``switched`` only)."""
    fields: tuple[str, ...] = ()
    """The record keys a user took back (``user_owned`` only)."""
    pause: PauseEvent | None = None
    """NodePools: the write pauses or resumes the pool."""
    dropped: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """``dropped`` only: the record keys whose field the API server stored without a part
    of what carbonshift wrote -> the part (``overflowAffinities``)."""
    holds_until: datetime | None = None
    """``kept`` only: the same object, intensities and fleet decide the same until then
    (the end of the dwell of the placement in force); None: until one of them changes.
    A kind whose verdicts move with the clock (:attr:`Rules.steady` False) says ``now``."""

    def applied(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """A copy of ``obj`` with :attr:`changes` made."""
        return apply(obj, self.changes)


def apply(obj: Mapping[str, Any], changes: tuple[Change, ...] | list[Change]) -> dict[str, Any]:
    """A deep copy of ``obj`` with ``changes`` made (missing parents are created)."""
    out: dict[str, Any] = copy.deepcopy(dict(obj))
    for change in changes:
        node = out
        for key in change.path[:-1]:
            child = node.get(key)
            if not isinstance(child, dict):
                if change.value is REMOVE:
                    break
                child = node[key] = {}
            node = child
        else:
            if change.value is REMOVE:
                node.pop(change.path[-1], None)
            else:
                node[change.path[-1]] = copy.deepcopy(change.value)
    return out


def not_managed(obj: Mapping[str, Any], namespace_labels: Mapping[str, str] | None) -> str | None:
    """Why ``obj`` is not re-evaluated (:func:`webhook.decision.optin.not_opted_in`, the
    rule admission applies, or no decision record of carbonshift's), or None."""
    reason = optin.not_opted_in(obj, namespace_labels)
    if reason:
        return reason
    if not meta_of(obj).annotations.get(DECISION):
        return f"no {DECISION} annotation"
    return None


@dataclasses.dataclass(frozen=True, slots=True)
class Judged:
    """A kind's reading of the stored object: the decider's proposal, whether stale data
    forbids any write, and the expected intensity of what is in force."""

    decision: Decision
    stale: str | None = None
    """Why nothing may be written (stale or missing intensity data); None: go on."""
    before: float | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Switch:
    """What a kind records and says about a switch."""

    record: Record
    """The new decision record, with this write in ``switches``."""
    why: str
    after: float | None = None
    pause: PauseEvent | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Rules:
    """The per-kind parts of :func:`step`, carried by the kind's row
    (:attr:`webhook.kinds.base.Following.rules`)."""

    judge: Callable[[Mapping[str, Any], Record, Inputs], Judged]
    """Decide, and say whether stale data forbids a write."""
    writes: Callable[[Change], bool]
    """Which of the decider's changes the re-evaluation may write."""
    kept: Callable[[Decision], str]
    """Why the object stays as it is (the decider proposes no change)."""
    switch: Callable[[Mapping[str, Any], list[Change], Record, Judged, Inputs], Switch]
    """The record and the reason of a switch to ``changes``."""
    urgent: Callable[[Switch], bool] = lambda _switch: False
    """A switch written even within ``min_interval_seconds`` (a NodePool's resume)."""
    steady: bool = True
    """A ``kept`` verdict depends on the clock only through the dwell (:attr:`Action.holds_until`);
    False: it may change any time (a NodePool's pause follows the forecast hour by hour)."""
    dropped: Callable[[Mapping[str, Any], Record], Mapping[str, str]] = lambda _obj, _record: {}
    """The record keys of fields carbonshift wrote that the API server stored with a part
    dropped (its schema lacks it) -> the part; the kind's decider decides such an object
    again as carbonshift's, in a shape the API keeps."""


def step(obj: Mapping[str, Any], inputs: Inputs, rules: Rules) -> Action:
    """What the re-evaluation does with the stored ``obj`` now (rules in the module doc);
    ``rules``: the kind's parts."""
    reason = not_managed(obj, inputs.namespace_labels)
    if reason:
        return Action("skipped", reason)
    previous = Record.decode(meta_of(obj).annotations.get(DECISION))
    judged = rules.judge(obj, previous, inputs)
    if judged.stale:
        return Action("stale", judged.stale)
    decision = judged.decision
    lost = rules.dropped(obj, previous)
    settled = released_or_skipped(obj, previous, decision, inputs.fields, lost)
    if settled is not None:
        return settled
    taken = user_fields(previous)
    changes = [
        c
        for c in decision.changes
        if rules.writes(c) and record_key(c.path, inputs.fields) not in taken
    ]
    new = decision.record
    if lost and new is not None:
        return _redecided(obj, changes, carried(new, taken), judged, inputs, rules=rules, lost=lost)
    if not changes or new is None or new is previous:
        holds = _dwell_end(previous, inputs) if rules.steady else inputs.now
        return Action("kept", rules.kept(decision), before=judged.before, holds_until=holds)
    switch = rules.switch(obj, changes, carried(new, taken), judged, inputs)
    last = last_write(obj, previous)
    if last is not None and not rules.urgent(switch):
        ago = (inputs.now - last).total_seconds()
        if ago < inputs.min_interval_seconds:
            limit = inputs.min_interval_seconds
            why = f"last write {ago:.0f} s ago, min_interval_seconds is {limit:g}"
            return Action("too_soon", why, before=judged.before, after=switch.after)
    changes.extend(recorded(obj, switch.record))
    return Action(
        "switched", switch.why, tuple(changes), judged.before, switch.after, pause=switch.pause
    )


def _redecided(
    obj: Mapping[str, Any],
    changes: list[Change],
    record: Record,
    judged: Judged,
    inputs: Inputs,
    *,
    rules: Rules,
    lost: Mapping[str, str],
) -> Action:
    """``dropped``: the object decided again as carbonshift's, in a shape the API keeps,
    with its record owning what is written (the annotation alone when the new shape is
    what the API server already stores)."""
    after = None
    if changes:
        switch = rules.switch(obj, changes, record, judged, inputs)
        record, after = switch.record, switch.after
    what = ", ".join(f"{part} of {_field_name(k)}" for k, part in sorted(lost.items()))
    why = (
        f"the API server dropped the {what} carbonshift wrote (its schema lacks it):"
        " decided again in a shape it keeps"
    )
    write = [*changes, *recorded(obj, record)]
    return Action("dropped", why, tuple(write), judged.before, after, dropped=dict(lost))


def _dwell_end(previous: Record, inputs: Inputs) -> datetime | None:
    """When the placement in force has dwelt ``dwell_hours`` (None: it has, or it is not
    held by carbonshift's record): until then a kept verdict may be the dwell's."""
    since = previous.since
    if since is None or inputs.hysteresis.dwell_hours <= 0:
        return None
    try:
        end = vocabulary.parse_time(since) + timedelta(hours=inputs.hysteresis.dwell_hours)
    except ValueError:
        return None
    return end if end > inputs.now else None


# --- internals ---------------------------------------------------------------------------


def _edited(
    obj: Mapping[str, Any],
    previous: Record,
    fields: Mapping[str, Path],
    dropped: Mapping[str, str] = EMPTY,
) -> list[str]:
    """Record keys carbonshift owns whose value in ``obj`` is no longer what it wrote,
    those the API server cut (``dropped``) left out."""
    out = []
    for key, mark in previous.own.items():
        if key in dropped:
            continue
        for prefix, path in fields.items():
            if key.startswith(prefix):
                value = _at(obj, (*path, key[len(prefix) :]))
                if fingerprint(value) != mark:
                    out.append(key)
                break
    return sorted(out)


def _at(obj: Mapping[str, Any], path: Path) -> Any:
    node: Any = obj
    for key in path:
        if type(node) is not dict and not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def record_key(path: Path, fields: Mapping[str, Path]) -> str | None:
    for prefix, where in fields.items():
        if len(path) == len(where) + 1 and path[: len(where)] == where:
            return prefix + path[-1]
    return None


def _field_name(key: str) -> str:
    return key.rsplit(".", 1)[-1]


def last_write(obj: Mapping[str, Any], previous: Record) -> datetime | None:
    """When the object was last written by carbonshift's re-evaluation, else created."""
    done = switches(previous)
    text = done[-1].get("t") if done else _at(obj, ("metadata", "creationTimestamp"))
    if not isinstance(text, str):
        return None
    try:
        return vocabulary.parse_time(text)
    except ValueError:
        return None


def carried(new: Record, taken: list[str]) -> Record:
    """The decider's new record (which carries the switch history over,
    :func:`webhook.decision.record.history`), still without the fields the user took back."""
    return released(new, taken) if taken else new


def rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def show(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.0f}"


def released_or_skipped(
    obj: Mapping[str, Any],
    previous: Record,
    decision: Decision,
    fields: Mapping[str, Path],
    dropped: Mapping[str, str] = EMPTY,
) -> Action | None:
    """``user_owned`` when the user edited a field carbonshift wrote (the field is released
    in the annotation; a field the API server cut, ``dropped``, is no edit), ``kept`` when
    the decider skipped the object; else None."""
    edited = _edited(obj, previous, fields, dropped)
    if edited:
        record = released(previous, edited)
        names = ", ".join(_field_name(k) for k in edited)
        why = f"{names} edited since carbonshift wrote it: no longer managed by carbonshift"
        return Action("user_owned", why, tuple(recorded(obj, record)), fields=tuple(edited))
    if decision.skipped:
        return Action("kept", decision.skipped)
    return None
