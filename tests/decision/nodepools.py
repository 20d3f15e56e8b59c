"""NodePools for the decision tests: as the user wrote them (:func:`pool`) and as
admission stored them (:func:`admitted`), the decision applied to one (:func:`apply`), and
the leader's re-evaluation step on a stored one (:func:`np_step`), checked to write only
limits, weight and the decision annotation."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import jsonpatch
import orjson

from tests.support import reading
from webhook import kinds, testing
from webhook.decision.follow import Action, Inputs
from webhook.decision.follow import apply as apply_changes
from webhook.decision.karpenter import nodepool
from webhook.decision.karpenter.nodepool import NodePoolInputs
from webhook.decision.karpenter.nodepool_step import NODEPOOL_FIELDS
from webhook.decision.karpenter.nodepool_step import step as nodepool_step
from webhook.decision.outcome import Change, Decision, stored
from webhook.decision.patch import build
from webhook.model.config import Config, NodePoolConfig
from webhook.model.intensity import Reading, Signal
from webhook.model.vocabulary import DECISION, MAX_PAUSE, REASON

T0 = datetime(2026, 3, 1, 10, tzinfo=UTC)
H = timedelta(hours=1)
DAY = timedelta(hours=24)
DIRTY_THEN_CLEAN = [500.0, 520.0, 510.0, 200.0, 450.0] + [500.0] * 20
"""Now 500 (high); the cleanest forecast hour is 3 h ahead."""
FLAT = [500.0] * 25
ADMITTED_AT = datetime(2026, 3, 1, 12, tzinfo=UTC)
"""When :func:`admitted` stores a NodePool unless told otherwise."""


TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"team": "batch"}},
    "spec": {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "requirements": [
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}
        ],
    },
}


def pool(
    strategy: str = "pause", annotations: dict[str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    """NodePool ``batch`` as the user wrote it (spot nodes; ``spec`` adds fields)."""
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {
            "name": "batch",
            "annotations": {"carbonshift.io/strategy": strategy, **(annotations or {})},
        },
        "spec": {"template": copy.deepcopy(TEMPLATE), **spec},
    }


def inputs(value: float | None, outlook: list[float] | None = None) -> NodePoolInputs:
    """DE at ``value`` (None: no reading), with the forecast ``outlook``."""
    table: dict[str, Reading] = {} if value is None else {"DE": reading("DE", value)}
    return NodePoolInputs("DE", table, NodePoolConfig(), outlook=outlook)


def apply(obj: dict[str, Any], decision: Decision) -> dict[str, Any]:
    """``obj`` as stored after ``decision`` (its changes and its record) is applied."""
    changes = list(decision.changes)
    if changes and decision.record is not None:
        changes.append(Change(("metadata", "annotations", DECISION), decision.record.encode()))
    stored: dict[str, Any] = jsonpatch.apply_patch(copy.deepcopy(obj), build(obj, changes))
    return stored


def record(obj: dict[str, Any]) -> dict[str, Any]:
    """The decision annotation of ``obj``, decoded."""
    doc: dict[str, Any] = orjson.loads(obj["metadata"]["annotations"][DECISION])
    return doc


def table(at: datetime, stale: bool = False, **values: float) -> dict[str, Reading]:
    """Hourly readings from ``at``: zone=value."""
    return {
        z: Reading(z, v, Signal.AVERAGE, at, at + timedelta(hours=1), False, "test", stale)
        for z, v in values.items()
    }


NP_CONFIG = Config(zone="DE")
NP_ROW = kinds.find("karpenter.sh", "NodePool")
assert NP_ROW is not None
NP_WRITES = {
    ("spec", "limits"),
    ("spec", "weight"),
    ("metadata", "annotations", DECISION),
    ("metadata", "annotations", REASON),
}


def admitted(
    at: datetime = ADMITTED_AT,
    *,
    limits: dict[str, Any] | None = None,
    max_pause: str | None = None,
    strategy: str = "pause,weight",
    g: float = 450,
) -> dict[str, Any]:
    """A NodePool as admission stored it at ``at`` with DE at ``g``."""
    annotations = {} if max_pause is None else {MAX_PAUSE: max_pause}
    obj = testing.nodepool(
        "batch",
        enabled=True,
        strategy=strategy,
        annotations=annotations,
        limits=limits,
        created=at,
    )
    assert NP_ROW is not None
    decision = NP_ROW.decide(obj, kinds.Context(NP_CONFIG, table(at, DE=g), at))
    assert decision.record is not None
    return apply_changes(obj, stored(obj, decision, NP_ROW.scope).changes)


def np_step(
    obj: Mapping[str, Any],
    at: datetime,
    *,
    stale: bool = False,
    outlook: list[float] | None = None,
    min_interval: float = 0,
    **values: float,
) -> Action:
    readings = table(at, stale, **values)

    def decide_on(o: Mapping[str, Any], t: Mapping[str, Reading]) -> Decision:
        inputs = NodePoolInputs("DE", t, NP_CONFIG.nodepools, outlook=outlook)
        return nodepool.reevaluate(o, inputs, at)

    inputs = Inputs(
        decide=lambda o: decide_on(o, readings),
        table=readings,
        clusters={},
        now=at,
        min_interval_seconds=min_interval,
        fields=NODEPOOL_FIELDS,
        zone="DE",
        decide_on=decide_on,
        outlook=outlook,
    )
    action = nodepool_step(obj, inputs)
    assert {c.path for c in action.changes} <= NP_WRITES
    if action.changes:
        assert only_limits_and_weight(obj, action.applied(obj))
    return action


def leaves(before: Any, after: Any, path: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """Leaf paths whose value differs between two objects."""
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        out: set[tuple[str, ...]] = set()
        for key in set(before) | set(after):
            out |= leaves(before.get(key), after.get(key), (*path, key))
        return out
    return set() if before == after else {path}


def only_limits_and_weight(before: Mapping[str, Any], after: Mapping[str, Any]) -> bool:
    changed = leaves(before, after)
    allowed = (
        ("spec", "limits"),
        ("spec", "weight"),
        ("metadata", "annotations", DECISION),
        ("metadata", "annotations", REASON),
    )
    return all(any(p[: len(a)] == a for a in allowed) for p in changed)
