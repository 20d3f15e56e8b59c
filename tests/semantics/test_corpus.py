"""Every corpus object x every annotation variant, and generated ones beyond the corpus,
through the webhook's own admission code (``webhook.cli.preview``): the checker must pass.

The fleet and intensity table are fixed (``tests/semantics/fleet.py``); the local grid is
``high``, so every NodePool strategy has something to do.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.semantics import fleet
from tests.semantics.holds import assert_holds

CASES = list(fleet.cases())
KNOWN = sorted(fleet.CONFIG.clusters)


# --- the corpus ----------------------------------------------------------------------------


@pytest.mark.parametrize(("obj"), [c[3] for c in CASES], ids=[c[0] for c in CASES])
def test_corpus_variant(obj: dict[str, Any]) -> None:
    assert_holds(obj)


# --- beyond the corpus ------------------------------------------------------------------------

names = st.lists(st.sampled_from([*KNOWN[:8], "ghost"]), min_size=1, max_size=4, unique=True)
label_selectors = st.sampled_from(
    [
        None,
        {"matchLabels": {"location": "us"}},
        {"matchLabels": {"tier": "prod"}},
        {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]},
        {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["dev"]}]},
    ]
)
field_selectors = st.sampled_from(
    [
        None,
        {"matchExpressions": [{"key": "provider", "operator": "In", "values": ["aws"]}]},
        {"matchExpressions": [{"key": "region", "operator": "NotIn", "values": ["cn-south-1"]}]},
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["us-west-1a"]}]},
    ]
)


@st.composite
def affinities(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if draw(st.booleans()):
        out["clusterNames"] = draw(names)
    if draw(st.booleans()):
        out["exclude"] = draw(names)
    if (labels := draw(label_selectors)) is not None:
        out["labelSelector"] = labels
    if (fields := draw(field_selectors)) is not None:
        out["fieldSelector"] = fields
    return out


@st.composite
def schedulings(draw: st.DrawFn) -> dict[str, Any] | None:
    choice = draw(st.sampled_from(["none", "dup", "divided", "agg", "static", "dynamic"]))
    if choice == "none":
        return None
    if choice == "dup":
        return {"replicaSchedulingType": "Duplicated"}
    out: dict[str, Any] = {"replicaSchedulingType": "Divided"}
    if choice == "agg":
        out["replicaDivisionPreference"] = "Aggregated"
    elif choice == "static":
        out["replicaDivisionPreference"] = "Weighted"
        listed = draw(names)
        weights = draw(st.lists(st.integers(1, 5), min_size=len(listed), max_size=len(listed)))
        out["weightPreference"] = {
            "staticWeightList": [
                {"targetCluster": {"clusterNames": [n]}, "weight": w}
                for n, w in zip(listed, weights, strict=True)
            ]
        }
    elif choice == "dynamic":
        out["replicaDivisionPreference"] = "Weighted"
        out["weightPreference"] = {"dynamicWeight": "AvailableReplicas"}
    return out


spreads = st.sampled_from(
    [
        None,
        [{"spreadByField": "cluster", "minGroups": 1, "maxGroups": 1}],
        [{"spreadByField": "cluster", "minGroups": 2, "maxGroups": 3}],
        [
            {"spreadByField": "cluster", "minGroups": 2},
            {"spreadByField": "region", "minGroups": 2, "maxGroups": 2},
        ],
        [{"spreadByLabel": "location", "minGroups": 1, "maxGroups": 1}],
    ]
)
policy_annotations = st.fixed_dictionaries(
    {},
    optional={
        "carbonshift.io/max-clusters": st.sampled_from(["1", "2", "3"]),
        "carbonshift.io/max-intensity": st.sampled_from(["50", "100", "400", "1000"]),
        "carbonshift.io/strategy": st.sampled_from(["weighted", "none"]),
        "carbonshift.io/override": st.just("true"),
    },
)


@st.composite
def policies(draw: st.DrawFn) -> dict[str, Any]:
    placement: dict[str, Any] = {}
    if draw(st.booleans()):
        count = draw(st.integers(1, 2))
        terms = []
        for i in range(count):
            term = {"affinityName": f"term-{i}", **draw(affinities())}
            if draw(st.integers(0, 3)) == 0:
                overflow = {"affinityName": f"overflow-{i}", **draw(affinities())}
                term["overflowAffinities"] = [overflow]
            terms.append(term)
        placement["clusterAffinities"] = terms
    elif draw(st.booleans()):
        placement["clusterAffinity"] = draw(affinities())
    if (scheduling := draw(schedulings())) is not None:
        placement["replicaScheduling"] = scheduling
    if (spread := draw(spreads)) is not None:
        placement["spreadConstraints"] = spread
    cluster_scoped = draw(st.booleans())
    meta: dict[str, Any] = {"name": "generated", "annotations": draw(policy_annotations)}
    selector = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
    if cluster_scoped:
        meta["labels"] = {"carbonshift.io/enabled": "true"}
    else:
        meta["namespace"] = "shop"
        selector["namespace"] = "shop"
    return {
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "ClusterPropagationPolicy" if cluster_scoped else "PropagationPolicy",
        "metadata": meta,
        "spec": {"resourceSelectors": [selector], "placement": placement},
    }


requirement_pool = [
    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
    {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64", "amd64"]},
    {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m5", "c5"]},
    {
        "key": "karpenter.k8s.aws/instance-family",
        "operator": "In",
        "values": ["m5", "m6g", "c7g", "r6i"],
        "minValues": 3,
    },
    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m7g.large"]},
    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["p3.8xlarge"]},
    {"key": "kubernetes.io/os", "operator": "In", "values": ["windows"]},
    {"key": "karpenter.k8s.aws/instance-cpu-manufacturer", "operator": "In", "values": ["intel"]},
    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]},
    {
        "key": "topology.kubernetes.io/zone",
        "operator": "In",
        "values": ["us-west-2a", "us-west-2b"],
    },
    {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-west-2c"]},
    {"key": "topology.kubernetes.io/zone", "operator": "NotIn", "values": ["us-west-2a"]},
    {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["ap-south-1a"]},
]


@st.composite
def nodepools(draw: st.DrawFn) -> dict[str, Any]:
    requirements = draw(st.lists(st.sampled_from(requirement_pool), max_size=4, unique_by=str))
    spec: dict[str, Any] = {
        "template": {
            "spec": {
                "nodeClassRef": {
                    "group": "karpenter.k8s.aws",
                    "kind": "EC2NodeClass",
                    "name": "default",
                },
                "requirements": requirements,
            }
        }
    }
    if draw(st.booleans()):
        spec["replicas"] = draw(st.integers(0, 5))
        if draw(st.booleans()):
            spec["limits"] = {"nodes": "10"}
    else:
        if draw(st.booleans()):
            spec["weight"] = draw(st.integers(1, 100))
        if draw(st.booleans()):
            spec["limits"] = draw(st.sampled_from([{"cpu": "100"}, {"cpu": "1k", "memory": "1Ti"}]))
    strategies = draw(
        st.lists(st.sampled_from(["efficiency", "zones", "weight", "pause"]), unique=True)
    )
    annotations = {"carbonshift.io/strategy": ",".join(strategies)} if strategies else {}
    if draw(st.booleans()):
        annotations["carbonshift.io/override"] = "true"
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {
            "name": "generated",
            "labels": {"carbonshift.io/enabled": "true"},
            "annotations": annotations,
        },
        "spec": spec,
    }


SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(policies())
def test_generated_policies(policy: dict[str, Any]) -> None:
    assert_holds(policy)


@SETTINGS
@given(nodepools())
def test_generated_nodepools(pool: dict[str, Any]) -> None:
    assert_holds(pool)
