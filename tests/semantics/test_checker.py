"""The checker itself: each invariant catches a hand-made violation and passes its fix."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.semantics import checker
from tests.semantics.checker import World
from tests.semantics.fleet import CONFIG, world
from webhook import testing
from webhook.model.config import ClusterConfig

WORLD = world()
ARM = {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}


SELECTORS = [{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "shop"}]


def pp(placement: dict[str, Any], **annotations: str) -> dict[str, Any]:
    return testing.propagation_policy(
        namespace="shop", annotations=annotations, selectors=SELECTORS, placement=placement
    )


def nodepool(requirements: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    obj = testing.nodepool(enabled=True, requirements=requirements)
    obj["spec"].update(spec)
    return obj


def placed(obj: dict[str, Any], placement: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["spec"]["placement"] = placement
    return out


def invariants(
    before: dict[str, Any], after: dict[str, Any], warnings: tuple[str, ...] = ()
) -> set[str]:
    return {v.invariant for v in checker.check(before, after, list(warnings), WORLD)}


NAMES = {"clusterNames": ["member1", "member2", "member3"]}


# --- valid ----------------------------------------------------------------------------------


def test_valid_objects_have_no_problems() -> None:
    assert checker.problems(pp({"clusterAffinity": NAMES})) == set()
    assert checker.problems(nodepool([ARM])) == set()


@pytest.mark.parametrize(
    "placement",
    [
        {"clusterAffinity": NAMES, "clusterAffinities": [{"affinityName": "a"}]},
        {"clusterAffinities": [{"affinityName": "a"}, {"affinityName": "a"}]},
        {"clusterAffinities": [{"affinityName": "not a key!"}]},
        {
            "clusterAffinities": [
                {
                    "affinityName": "a",
                    "clusterNames": ["m"],
                    "overflowAffinities": [{"affinityName": "b"}],
                }
            ],
            "replicaScheduling": {
                "replicaSchedulingType": "Divided",
                "replicaDivisionPreference": "Weighted",
                "weightPreference": {
                    "staticWeightList": [{"targetCluster": {"clusterNames": ["m"]}, "weight": 1}]
                },
            },
        },
        {
            "clusterAffinity": {
                "fieldSelector": {
                    "matchExpressions": [{"key": "name", "operator": "In", "values": ["x"]}]
                }
            }
        },
        {"spreadConstraints": [{"spreadByField": "region", "minGroups": 1}]},
        {"spreadConstraints": [{"spreadByField": "cluster", "minGroups": 3, "maxGroups": 2}]},
        {"replicaScheduling": {"replicaSchedulingType": "Sideways"}},
    ],
)
def test_karmada_rules_and_schema_catch_invalid_placements(placement: dict[str, Any]) -> None:
    good = pp({})
    assert invariants(good, placed(good, placement)) >= {"valid"}


@pytest.mark.parametrize(
    ("requirements", "spec"),
    [
        ([{"key": "karpenter.sh/nodepool", "operator": "In", "values": ["x"]}], {}),
        ([{"key": "kubernetes.io/arch", "operator": "In", "values": []}], {}),
        ([{"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["-1"]}], {}),
        ([{"key": "k", "operator": "In", "values": ["a"], "minValues": 2}], {}),
        ([], {"replicas": 2, "weight": 10}),
        ([], {"replicas": 2, "limits": {"cpu": "0"}}),
        ([ARM] * 101, {}),
    ],
)
def test_karpenter_cel_rules_and_schema_catch_invalid_nodepools(
    requirements: list[dict[str, Any]], spec: dict[str, Any]
) -> None:
    assert checker.problems(nodepool(requirements, **spec))


def test_an_object_invalid_already_is_not_blamed_on_the_webhook() -> None:
    fragment: dict[str, Any] = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "spec": {}}
    stored = copy.deepcopy(fragment)
    stored["spec"]["template"] = {"metadata": {"labels": {"carbonshift.io/intensity": "high"}}}
    assert "valid" not in invariants(fragment, stored)


# --- reach ----------------------------------------------------------------------------------


def test_reach_follows_karmada_selectors() -> None:
    us = {
        "labelSelector": {
            "matchExpressions": [{"key": "location", "operator": "In", "values": ["us"]}]
        }
    }
    assert checker.reach({"clusterAffinity": us}, CONFIG.clusters) == {"member1", "member3"}
    field = {
        "fieldSelector": {
            "matchExpressions": [{"key": "region", "operator": "NotIn", "values": ["cn-south-1"]}]
        },
        "clusterNames": ["member1", "member2"],
    }
    assert checker.reach({"clusterAffinity": field}, CONFIG.clusters) == {"member2"}
    zone = {
        "fieldSelector": {
            "matchExpressions": [{"key": "zone", "operator": "In", "values": ["us-west-1a"]}]
        }
    }
    assert checker.reach({"clusterAffinity": zone}, CONFIG.clusters) == {"member3"}


@pytest.mark.parametrize(
    "after",
    [
        {"clusterAffinity": {"clusterNames": ["member1", "member2", "member3", "member4"]}},
        {"clusterAffinity": {}},
        {
            "clusterAffinities": [
                {"affinityName": "g", "clusterNames": ["member1"]},
                {"affinityName": "f"},
            ]
        },
        {
            "clusterAffinities": [
                {
                    "affinityName": "g",
                    "clusterNames": ["member1"],
                    "overflowAffinities": [{"affinityName": "o", "clusterNames": ["member5"]}],
                }
            ]
        },
    ],
)
def test_widening_the_cluster_set_is_caught(after: dict[str, Any]) -> None:
    before = pp({"clusterAffinity": NAMES})
    assert "reach" in invariants(before, placed(before, after))


def test_dropping_a_label_selector_is_caught_through_phantom_clusters() -> None:
    before = pp({"clusterAffinity": {"labelSelector": {"matchLabels": {"location": "us"}}}})
    after = placed(before, {"clusterAffinity": {"clusterNames": ["member1", "member3"]}})
    assert "reach" not in invariants(before, after)  # only the known ones: narrower
    after = placed(before, {"clusterAffinity": {"exclude": ["member2"]}})
    assert "reach" in invariants(before, after)


def test_a_user_static_weight_list_limits_reach() -> None:
    user: dict[str, Any] = {
        "replicaSchedulingType": "Divided",
        "replicaDivisionPreference": "Weighted",
        "weightPreference": {
            "staticWeightList": [{"targetCluster": {"clusterNames": ["member1"]}, "weight": 1}]
        },
    }
    before = pp({"clusterAffinity": NAMES, "replicaScheduling": user}, **{checker.OVERRIDE: "true"})
    carbon = copy.deepcopy(user)
    carbon["weightPreference"]["staticWeightList"] = [
        {"targetCluster": {"clusterNames": [n]}, "weight": 10} for n in NAMES["clusterNames"]
    ]
    after = placed(before, {"clusterAffinity": NAMES, "replicaScheduling": carbon})
    assert "reach" in invariants(before, after)


def test_changing_spread_constraints_is_caught() -> None:
    spread = [{"spreadByField": "cluster", "minGroups": 2, "maxGroups": 2}]
    before = pp({"clusterAffinity": NAMES, "spreadConstraints": spread})
    after = placed(before, {"clusterAffinity": NAMES})
    assert "reach" in invariants(before, after)


# --- overwrite -------------------------------------------------------------------------------


def test_narrowing_additions_are_not_overwrites() -> None:
    before = pp({"clusterAffinity": {**NAMES, "exclude": ["member4"]}})
    after = placed(before, {"clusterAffinity": {**NAMES, "exclude": ["member3", "member4"]}})
    assert invariants(before, after) == set()


def test_user_fields_are_overwrites_unless_override() -> None:
    user = {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"}
    before = pp({"clusterAffinity": NAMES, "replicaScheduling": user})
    ours = {**user, "replicaDivisionPreference": "Weighted"}
    after = placed(before, {"clusterAffinity": NAMES, "replicaScheduling": ours})
    assert "overwrite" in invariants(before, after)
    before["metadata"]["annotations"][checker.OVERRIDE] = "true"
    after["metadata"]["annotations"][checker.OVERRIDE] = "true"
    assert "overwrite" not in invariants(before, after)


def test_replacing_user_affinity_terms_is_an_overwrite() -> None:
    terms = [{"affinityName": "primary", "clusterNames": ["member1"]}]
    before = pp({"clusterAffinities": terms}, **{checker.MAX_CLUSTERS: "1"})
    after = placed(
        before,
        {
            "clusterAffinities": [
                {"affinityName": "carbonshift-greenest", "clusterNames": ["member1"]}
            ]
        },
    )
    assert "overwrite" in invariants(before, after, ("carbonshift: something",))


def test_nodepool_user_limits_weight_and_requirements_are_kept() -> None:
    before = nodepool([ARM], limits={"cpu": "100", "memory": "100Gi"}, weight=5)
    after = copy.deepcopy(before)
    after["spec"]["limits"] = {"cpu": "0", "memory": "100Gi"}  # the pause: fine
    assert invariants(before, after) == set()
    after["spec"]["limits"] = {"cpu": "0"}
    assert "overwrite" in invariants(before, after)
    after = copy.deepcopy(before)
    after["spec"]["weight"] = 50
    assert "overwrite" in invariants(before, after)
    after = copy.deepcopy(before)
    after["spec"]["template"]["spec"]["requirements"] = []
    assert "overwrite" in invariants(before, after)


# --- schedulable ------------------------------------------------------------------------------


def test_a_green_term_below_min_groups_with_no_fallback_is_unschedulable() -> None:
    spread = [{"spreadByField": "cluster", "minGroups": 2, "maxGroups": 2}]
    before = pp(
        {"clusterAffinity": {"clusterNames": ["member1", "member2"]}, "spreadConstraints": spread}
    )
    split = placed(
        before,
        {
            "spreadConstraints": spread,
            "clusterAffinities": [
                {"affinityName": "g", "clusterNames": ["member1"]},
                {"affinityName": "f", "clusterNames": ["member2"]},
            ],
        },
    )
    assert "schedulable" in invariants(before, split)
    kept = placed(
        before,
        {
            "spreadConstraints": spread,
            "clusterAffinities": [{"affinityName": "g", "clusterNames": ["member1", "member2"]}],
        },
    )
    assert "schedulable" not in invariants(before, kept)


def test_region_spread_counts_regions() -> None:
    spread = [
        {"spreadByField": "cluster", "minGroups": 1},
        {"spreadByField": "region", "minGroups": 2},
    ]
    two_regions = {"clusterAffinity": {"clusterNames": ["member1", "member2"]}}
    one_region = {"clusterAffinity": {"clusterNames": ["cluster1", "public-cloud-member1"]}}
    assert checker.schedulable({**two_regions, "spreadConstraints": spread}, CONFIG.clusters)
    assert not checker.schedulable({**one_region, "spreadConstraints": spread}, CONFIG.clusters)


@pytest.mark.parametrize(
    "requirement",
    [
        {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m5", "c5"]},
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["p3.8xlarge"]},
        {"key": "kubernetes.io/os", "operator": "In", "values": ["windows"]},
        {
            "key": "karpenter.k8s.aws/instance-cpu-manufacturer",
            "operator": "In",
            "values": ["intel", "amd"],
        },
        {
            "key": "karpenter.k8s.aws/instance-family",
            "operator": "In",
            "values": ["m5", "m6g", "c5"],
            "minValues": 2,
        },
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
    ],
)
def test_arm64_against_x86_only_requirements_is_unsatisfiable(requirement: dict[str, Any]) -> None:
    before = nodepool([requirement])
    after = nodepool([requirement, ARM])
    assert checker.unsatisfiable([requirement]) is None
    assert "schedulable" in invariants(before, after, ("carbonshift: x",))


def test_arm64_with_graviton_families_is_fine() -> None:
    family = {
        "key": "karpenter.k8s.aws/instance-family",
        "operator": "In",
        "values": ["m6g", "c7gd", "r8g", "m5"],
        "minValues": 2,
    }
    assert checker.unsatisfiable([family, ARM]) is None


# --- warned -----------------------------------------------------------------------------------


def test_an_unapplied_annotation_needs_a_warning() -> None:
    before = pp({"clusterAffinity": NAMES}, **{checker.MAX_CLUSTERS: "1"})
    assert "warned" in invariants(before, copy.deepcopy(before))
    assert "warned" not in invariants(before, copy.deepcopy(before), ("carbonshift: no",))
    note = ("carbonshift: no intensity data for x",)
    assert "warned" in invariants(before, copy.deepcopy(before), note)


def test_max_intensity_needs_a_warning_only_when_dirty_clusters_stay() -> None:
    high = pp({"clusterAffinity": NAMES}, **{checker.MAX_INTENSITY: "1000"})
    assert invariants(high, copy.deepcopy(high)) == set()
    low = pp({"clusterAffinity": NAMES}, **{checker.MAX_INTENSITY: "100"})
    assert "warned" in invariants(low, copy.deepcopy(low))
    narrowed = placed(low, {"clusterAffinity": {**NAMES, "exclude": ["member3"]}})
    assert invariants(low, narrowed) == set()


def test_nodepool_strategies_need_their_effect_or_a_warning() -> None:
    before = nodepool([])
    before["metadata"]["annotations"] = {checker.STRATEGY: "efficiency,pause"}
    assert "warned" in invariants(before, copy.deepcopy(before))
    after = copy.deepcopy(before)
    after["spec"]["template"]["spec"]["requirements"] = [ARM]
    after["spec"]["limits"] = {"cpu": "0"}
    assert invariants(before, after) == set()
    low = World(clusters=WORLD.clusters, level="low")
    assert checker.check(before, copy.deepcopy(before), [], low) == []


def test_not_opted_in_objects_need_no_warning() -> None:
    before = nodepool([])
    before["metadata"] = {"name": "x", "annotations": {checker.STRATEGY: "weight"}}
    assert invariants(before, copy.deepcopy(before)) == set()


def test_phantoms_do_not_collide_with_known_names() -> None:
    everyone = checker.universe({"a": ClusterConfig(name="a", zone="SE")})
    assert set(everyone) == {"a", "phantom-a", "phantom-bare"}
