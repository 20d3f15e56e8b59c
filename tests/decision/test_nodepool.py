"""Karpenter NodePool decisions."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest

from tests.support import reading
from webhook.config import NodePoolConfig
from webhook.decision.nodepool import NodePoolInputs, decide
from webhook.decision.outcome import Change
from webhook.decision.record import Record
from webhook.intensity import Reading
from webhook.patch import build
from webhook.vocabulary import DECISION


def nodepool(strategy: str | None = None, **spec: Any) -> dict[str, Any]:
    annotations = {"carbonshift.io/strategy": strategy} if strategy else {}
    template_spec = {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "requirements": spec.pop("requirements", []),
    }
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default", "annotations": annotations},
        "spec": {"template": {"spec": template_spec}, **spec},
    }


def store(obj: dict[str, Any], inputs: NodePoolInputs) -> dict[str, Any]:
    decision = decide(obj, inputs)
    changes = list(decision.changes)
    if changes and decision.record is not None:
        changes.append(Change(("metadata", "annotations", DECISION), decision.record.encode()))
    stored: dict[str, Any] = jsonpatch.apply_patch(copy.deepcopy(obj), build(obj, changes))
    return stored


def inputs(value: float, **settings: Any) -> NodePoolInputs:
    table: dict[str, Reading] = {"DE": reading("DE", value), "FR": reading("FR", 60.0)}
    return NodePoolInputs("DE", table, NodePoolConfig(**settings))


@pytest.mark.parametrize(("value", "level"), [(100, "low"), (200, "medium"), (450, "high")])
def test_template_label_carries_the_intensity_class(value: float, level: str) -> None:
    stored = store(nodepool(), inputs(value))
    assert stored["spec"]["template"]["metadata"]["labels"]["carbonshift.io/intensity"] == level


def test_efficiency_prefers_arm64_only_when_high_and_unconstrained() -> None:
    stored = store(nodepool("efficiency"), inputs(450))
    assert {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]} in stored["spec"][
        "template"
    ]["spec"]["requirements"]
    assert (
        store(nodepool("efficiency"), inputs(200))["spec"]["template"]["spec"]["requirements"] == []
    )
    mine = [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]
    decision = decide(nodepool("efficiency", requirements=mine), inputs(450))
    assert all(c.path[-1] != "requirements" for c in decision.changes)
    assert any("efficiency left alone" in w for w in decision.warnings)


def test_zones_keep_only_the_greenest_topology_zones() -> None:
    topo = {"zone-a": "DE", "zone-b": "FR", "zone-c": "FR"}
    stored = store(nodepool("zones"), inputs(450, topology_zones=topo))
    assert {
        "key": "topology.kubernetes.io/zone",
        "operator": "In",
        "values": ["zone-b", "zone-c"],
    } in (stored["spec"]["template"]["spec"]["requirements"])
    mine = [
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a", "zone-c"]}
    ]
    settings = {"topology_zones": topo, "min_zones": 1}
    stored = store(nodepool("zones", requirements=mine), inputs(450, **settings))
    assert stored["spec"]["template"]["spec"]["requirements"][-1]["values"] == ["zone-c"]


def test_weight_comes_from_greenness_and_respects_the_user() -> None:
    assert store(nodepool("weight"), inputs(100))["spec"]["weight"] == 90
    assert store(nodepool("weight", weight=7), inputs(100))["spec"]["weight"] == 7
    obj = nodepool("weight", weight=7)
    obj["metadata"]["annotations"]["carbonshift.io/override"] = "true"
    assert store(obj, inputs(100))["spec"]["weight"] == 90
    decision = decide(nodepool("weight", replicas=3), inputs(100))
    assert all(c.path != ("spec", "weight") for c in decision.changes)


def test_pause_zeroes_cpu_when_high_and_remembers_the_limits() -> None:
    stored = store(nodepool("pause", limits={"cpu": "100", "memory": "1Ti"}), inputs(450))
    assert stored["spec"]["limits"] == {"cpu": "0"}
    record = Record.decode(stored["metadata"]["annotations"][DECISION])
    assert record.orig["spec.limits"] == {"cpu": "100", "memory": "1Ti"}
    assert record.body["paused"] is True
    # A refresh when the grid is clean again restores the user's limits.
    stored["metadata"]["annotations"]["carbonshift.io/refresh"] = "1"
    again = store(stored, inputs(100))
    assert again["spec"]["limits"] == {"cpu": "100", "memory": "1Ti"}


def test_decision_is_idempotent_for_every_strategy() -> None:
    topo = {"zone-a": "DE", "zone-b": "FR"}
    for strategy in ("efficiency", "zones", "weight", "pause", "efficiency,zones,weight,pause"):
        stored = store(nodepool(strategy, limits={"cpu": "8"}), inputs(450, topology_zones=topo))
        assert decide(stored, inputs(450, topology_zones=topo)).changes == [], strategy


def test_missing_zone_or_data_skips_with_a_warning() -> None:
    decision = decide(nodepool(), NodePoolInputs(None, {}, NodePoolConfig()))
    assert decision.skipped
    assert decision.changes == []
    decision = decide(nodepool(), NodePoolInputs("JP-TK", {}, NodePoolConfig()))
    assert decision.skipped == "no intensity data for zone JP-TK"
