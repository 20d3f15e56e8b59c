"""Karpenter NodePool decisions."""

from __future__ import annotations

from typing import Any

import pytest

from tests.decision.admission_pools import inputs, nodepool, store
from tests.support import reading
from webhook.decision.karpenter.nodepool import NodePoolInputs, decide
from webhook.decision.record import Record
from webhook.model.config import NodePoolConfig
from webhook.model.vocabulary import DECISION


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
    assert stored["spec"]["limits"] == {"cpu": "0", "memory": "1Ti"}  # other limits stay
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


ARM64 = {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}
FAMILY = "karpenter.k8s.aws/instance-family"


def requirement(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, **({"values": list(values)} if values else {})}


# Pools shaped like the Karpenter docs' examples.
CANNOT_RUN_ARM64 = {
    "gpu": [requirement(FAMILY, "In", "p3", "p4d", "g4dn", "g5")],
    "windows": [requirement("kubernetes.io/os", "In", "windows")],
    "x86 families": [requirement(FAMILY, "In", "m5", "c5", "r5")],
    "intel": [requirement("karpenter.k8s.aws/instance-cpu-manufacturer", "In", "intel")],
    "amd": [requirement("karpenter.k8s.aws/instance-cpu-manufacturer", "In", "amd")],
    "arch NotIn arm64": [requirement("kubernetes.io/arch", "NotIn", "arm64")],
    "old generations": [
        requirement("karpenter.k8s.aws/instance-category", "In", "c", "m", "r"),
        requirement("karpenter.k8s.aws/instance-generation", "Lt", "6"),
    ],
}
CAN_RUN_ARM64 = {
    "default": [],
    "docs default": [
        requirement("karpenter.k8s.aws/instance-category", "In", "c", "m", "r"),
        requirement("karpenter.k8s.aws/instance-generation", "Gt", "2"),
    ],
    "mixed families": [requirement(FAMILY, "In", "m5", "m7g")],
    "graviton gpu": [requirement("karpenter.k8s.aws/instance-gpu-manufacturer", "In", "nvidia")],
}


@pytest.mark.parametrize("name", CANNOT_RUN_ARM64)
def test_efficiency_leaves_pools_without_arm64_alone_and_says_so(name: str) -> None:
    mine = CANNOT_RUN_ARM64[name]
    stored = store(nodepool("efficiency", requirements=mine), inputs(450))
    assert stored["spec"]["template"]["spec"]["requirements"] == mine
    record = Record.decode(stored["metadata"]["annotations"][DECISION])
    [left] = record.body["left"]
    assert left["rule"] == "efficiency"
    assert "arm64" in left["reason"]
    warnings = decide(stored, inputs(450)).warnings
    assert any(w.startswith("carbonshift: efficiency left alone: ") for w in warnings)
    assert not any(w.endswith("…") for w in warnings)
    assert all(len(w) < 120 for w in warnings)


@pytest.mark.parametrize("name", CAN_RUN_ARM64)
def test_efficiency_adds_arm64_to_pools_that_can_run_it(name: str) -> None:
    mine = CAN_RUN_ARM64[name]
    stored = store(nodepool("efficiency", requirements=mine), inputs(450))
    assert stored["spec"]["template"]["spec"]["requirements"] == [*mine, ARM64]
    assert "left" not in Record.decode(stored["metadata"]["annotations"][DECISION]).body


def test_efficiency_on_kwok_pools_follows_the_kwok_instance_types() -> None:
    pool = nodepool("efficiency")
    pool["spec"]["template"]["spec"]["nodeClassRef"] = {
        "group": "karpenter.kwok.sh",
        "kind": "KWOKNodeClass",
        "name": "default",
    }
    assert ARM64 in store(pool, inputs(450))["spec"]["template"]["spec"]["requirements"]
    x86 = [requirement("node.kubernetes.io/instance-type", "In", "c-4x-amd64-linux")]
    pool["spec"]["template"]["spec"]["requirements"] = x86
    assert store(pool, inputs(450))["spec"]["template"]["spec"]["requirements"] == x86


def test_efficiency_adds_nothing_when_the_user_pins_arm64() -> None:
    mine = [ARM64]
    decision = decide(nodepool("efficiency", requirements=mine), inputs(450))
    assert all(c.path[-1] != "requirements" for c in decision.changes)
    assert not any("efficiency" in w for w in decision.warnings)


def test_requirements_stay_within_karpenters_limit_of_100() -> None:
    mine = [requirement(f"example.com/k{i}", "Exists") for i in range(99)]
    stored = store(nodepool("efficiency", requirements=mine), inputs(450))
    assert stored["spec"]["template"]["spec"]["requirements"] == mine
    record = Record.decode(stored["metadata"]["annotations"][DECISION])
    assert record.body["left"] == [
        {"rule": "efficiency", "reason": "the NodePool already has 100 requirements and labels"}
    ]


def zone_inputs(values: dict[str, float], **settings: Any) -> NodePoolInputs:
    grids = ["DE", "FR", "PL", "SE", "NO"]
    topo = {z: grids[i] for i, z in enumerate(values)}
    table = {grids[i]: reading(grids[i], v) for i, v in enumerate(values.values())}
    return NodePoolInputs("DE", table, NodePoolConfig(topology_zones=topo, **settings))


@pytest.mark.parametrize(
    ("values", "min_zones", "kept"),
    [
        ({"a": 50, "b": 100, "c": 200}, 2, ["a", "b"]),  # N = min_zones
        ({"a": 50, "b": 100, "c": 200}, 1, ["a"]),
        ({"a": 50, "b": 52, "c": 54, "d": 200}, 2, ["a", "b", "c"]),  # N = within 10 %
        ({"a": 300, "b": 100, "c": 200, "d": 50}, 3, ["b", "c", "d"]),
        ({"a": 50, "b": 100, "c": 200}, 3, None),  # keeping 3 of 3 narrows nothing
        ({"a": 50, "b": 50}, 1, None),  # all equally green
    ],
)
def test_zones_keep_at_least_min_zones(
    values: dict[str, float], min_zones: int, kept: list[str] | None
) -> None:
    decision = decide(nodepool("zones"), zone_inputs(values, min_zones=min_zones))
    [written] = [c.value for c in decision.changes if c.path[-1] == "requirements"] or [None]
    if kept is None:
        assert written is None
        return
    assert written == [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": kept}]
    assert f"pool narrowed to the {len(kept)} greenest of {len(values)} zones" in " ".join(
        decision.warnings
    )


def test_zones_say_when_min_zones_keeps_every_zone() -> None:
    decision = decide(nodepool("zones"), zone_inputs({"a": 50, "b": 200}, min_zones=2))
    assert all(c.path[-1] != "requirements" for c in decision.changes)
    assert decision.record is not None
    assert decision.record.body["left"] == [
        {"rule": "zones", "reason": "kept all 2 zones (nodepools.min_zones is 2)"}
    ]
    assert "carbonshift: zones left alone: kept all 2 zones (nodepools.min_zones is 2)" in (
        decision.warnings
    )


def test_pause_says_why_in_a_warning() -> None:
    decision = decide(nodepool("pause", limits={"cpu": "100"}), inputs(450))
    assert (
        'carbonshift: pause: limits.cpu set to "0", no new nodes: DE is at 450 g/kWh, '
        "high from 400" in decision.warnings
    )
    static = decide(nodepool("pause", replicas=2), inputs(450))
    assert all(c.path != ("spec", "limits") for c in static.changes)
    assert static.record is not None
    assert static.record.body["left"][0]["rule"] == "pause"
    assert not any("pause" in w for w in decide(nodepool("pause"), inputs(200)).warnings)


def test_zones_says_so_when_the_pool_allows_no_zone_carbonshift_knows() -> None:
    topo = {"eu-central-1a": "DE", "eu-west-3a": "FR"}
    pool = nodepool("zones")
    pool["spec"]["template"]["spec"]["requirements"] = [
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["ap-south-1a"]}
    ]
    decision = decide(pool, inputs(450, topology_zones=topo))
    assert any("zones left alone: the pool allows no zone" in w for w in decision.warnings)
    assert decision.record is not None
    assert decision.record.body["left"][0]["rule"] == "zones"
