"""The non-workloads a managed policy selects follow every cluster its replicas may use."""

from __future__ import annotations

from typing import Any

import pytest

from tests.decision.placements import mutate
from tests.support import FLEET, reading
from webhook.controllers.karmada.carrier import plan, tiered
from webhook.decision.karmada import carry
from webhook.decision.karmada.placement import PolicyInputs, decide
from webhook.decision.karmada.terms import fill_tiers
from webhook.decision.record import Record
from webhook.model.config import parse
from webhook.model.vocabulary import DECISION
from webhook.testing import propagation_policy


def _selectors(*pairs: tuple[str, str]) -> dict[str, Any]:
    return {"resourceSelectors": [{"apiVersion": a, "kind": k, "name": "x"} for a, k in pairs]}


@pytest.mark.parametrize(
    ("pairs", "mixed", "no_workload"),
    [
        ([("apps/v1", "Deployment")], False, False),
        ([("apps/v1", "Deployment"), ("v1", "ConfigMap"), ("v1", "Service")], True, False),
        ([("v1", "ConfigMap"), ("v1", "Secret")], False, True),
        ([("apps/v1", "DaemonSet"), ("v1", "ConfigMap")], False, True),
        ([("example.io/v1", "Trainer"), ("v1", "Secret")], True, False),
        ([("example.io/v1", "Trainer")], False, False),
        ([("networking.k8s.io/v1", "Ingress"), ("batch/v1", "Job")], True, False),
        # A kind nobody knows in a built-in group may still be a workload: never "only
        # non-workloads" on a guess.
        ([("v1", "Widget"), ("v1", "ConfigMap")], True, False),
        ([("0", "A")], False, False),
    ],
)
def test_selection_tells_workloads_from_the_rest(
    pairs: list[tuple[str, str]], mixed: bool, no_workload: bool
) -> None:
    picked = carry.selection(_selectors(*pairs))
    assert (picked.mixed, picked.no_workload) == (mixed, no_workload)


@pytest.mark.parametrize(
    ("spec", "workload"),
    [
        ({"replicas": 3}, True),
        ({"replicas": 0}, False),  # a Deployment scaled to 0 is not a workload to Karmada
        ({"replicaRequirements": {"resourceRequest": {"cpu": "1"}}}, True),
        ({"components": [{"name": "a", "replicas": 1}]}, True),
        ({}, False),
    ],
)
def test_is_workload_is_karmadas(spec: dict[str, Any], workload: bool) -> None:
    assert carry.is_workload(spec) is workload


FILL = {
    "clusterAffinities": [
        {
            "affinityName": "carbonshift-greenest",
            "clusterNames": ["member-se"],
            "overflowAffinities": [
                {"affinityName": "carbonshift-tier-1", "clusterNames": ["member-fr"]},
                {"affinityName": "carbonshift-tier-2", "clusterNames": ["member-de", "member-pl"]},
            ],
        }
    ]
}


def test_replica_reach_names_every_tier_in_order() -> None:
    assert carry.replica_reach(FILL) == ["member-se", "member-fr", "member-de", "member-pl"]
    assert carry.carbonshift_terms(FILL)
    assert not carry.carbonshift_terms({"clusterAffinity": {"clusterNames": ["a"]}})


def test_carried_keeps_other_snapshots_and_is_idempotent() -> None:
    theirs = {"namespace": "shop", "name": "web-deployment", "clusters": [{"name": "member-se"}]}
    ours = ("shop", carry.snapshot_name("PropagationPolicy", "web"))
    first = carry.carried([theirs], ours, ["member-fr", "member-se"])
    assert first == [
        theirs,
        {
            "namespace": "shop",
            "name": "carbonshift.PropagationPolicy.web",
            "clusters": [{"name": "member-fr"}, {"name": "member-se"}],
        },
    ]
    assert carry.carried(first, ours, ["member-se", "member-fr"]) is None
    assert carry.carried(first, ours, None) == [theirs]
    assert carry.carried([theirs], ours, None) is None


def _policy(name: str, placement: dict[str, Any], managed: bool = True) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "shop"}
    if managed:
        meta["annotations"] = {DECISION: "{}"}
    return {"kind": "PropagationPolicy", "metadata": meta, "spec": {"placement": placement}}


def _binding(name: str, spec: dict[str, Any], policy: str = "web") -> dict[str, Any]:
    annotations = {
        "propagationpolicy.karmada.io/name": policy,
        "propagationpolicy.karmada.io/namespace": "shop",
    }
    return {
        "apiVersion": "work.karmada.io/v1alpha2",
        "metadata": {"name": name, "namespace": "shop", "annotations": annotations},
        "spec": spec,
    }


def test_plan_carries_non_workloads_to_every_tier_and_where_replicas_run() -> None:
    policies = {("PropagationPolicy", "shop", "web"): tiered(_policy("web", FILL)) or []}
    deployment = _binding(
        "web-deployment",
        {"replicas": 10, "clusters": [{"name": "member-se", "replicas": 4},
                                      {"name": "member-xx", "replicas": 6}]},
    )  # fmt: skip
    config = _binding("web-config-configmap", {})
    service = _binding("web-service", {"requiredBy": []})
    other = _binding("other-configmap", {}, policy="someone-else")
    changes = {s.binding["metadata"]["name"]: s for s in
               plan(policies, [deployment, config, service, other])}  # fmt: skip
    assert set(changes) == {"web-config-configmap", "web-service"}
    step = changes["web-service"]
    assert step.policy == ("PropagationPolicy", "shop", "web")
    required = step.required_by(service)
    assert required is not None
    assert [c["name"] for c in required[0]["clusters"]] == [
        "member-de", "member-fr", "member-pl", "member-se", "member-xx",
    ]  # fmt: skip


def test_plan_releases_a_policy_no_longer_placed_in_tiers() -> None:
    snapshot = {
        "namespace": "shop",
        "name": "carbonshift.PropagationPolicy.web",
        "clusters": [{"name": "member-se"}],
    }
    config = _binding("web-config-configmap", {"requiredBy": [snapshot]})
    assert tiered(_policy("web", FILL, managed=False)) is None
    [step] = plan({}, [config])
    assert (step.binding["metadata"]["name"], step.clusters) == ("web-config-configmap", None)
    assert step.required_by(config) == []
    # Others' snapshots on the binding as the API server holds it now are kept.
    theirs = {"namespace": "shop", "name": "web-deployment", "clusters": [{"name": "a"}]}
    assert step.required_by({"spec": {"requiredBy": [snapshot, theirs]}}) == [theirs]


# --- admission: what the decision writes for each selection ------------------------------

ADMISSION_CONFIG = parse(FLEET)
TABLE = {"FR": reading("FR", 60.0), "DE": reading("DE", 380.0), "PL": reading("PL", 700.0)}
NAMED = ["member-pl", "member-de", "member-fr"]
APP = [
    {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
    {"apiVersion": "v1", "kind": "ConfigMap", "name": "web-config"},
    {"apiVersion": "v1", "kind": "Service", "name": "web"},
]


def _decide(obj: dict[str, Any], *, carried: bool) -> tuple[dict[str, Any], list[str]]:
    return mutate(obj, PolicyInputs(ADMISSION_CONFIG.clusters, TABLE, carried=carried))


def test_with_a_leader_an_application_policy_gets_the_fill_and_the_record_says_what_follows() -> (
    None
):
    out, _ = _decide(propagation_policy(selectors=APP, clusters=NAMED), carried=True)
    placement = out["spec"]["placement"]
    assert fill_tiers(placement) == [["member-fr"], ["member-de"], ["member-pl"]]
    record = Record.decode(out["metadata"]["annotations"][DECISION])
    assert record.body["carry"] == ["ConfigMap", "Service"]


def test_without_a_leader_an_application_policy_keeps_one_group_and_says_why() -> None:
    out, warnings = _decide(propagation_policy(selectors=APP, clusters=NAMED), carried=False)
    placement = out["spec"]["placement"]
    assert fill_tiers(placement) is None
    assert "clusterAffinities" not in placement  # every candidate in the one group
    weights = placement["replicaScheduling"]["weightPreference"]["staticWeightList"]
    assert len(weights) == 3
    record = Record.decode(out["metadata"]["annotations"][DECISION])
    assert record.body["left"][0]["rule"] == "ordered fill"
    assert "ConfigMap, Service" in record.body["left"][0]["reason"]
    assert any("ConfigMap, Service would reach the first tier only" in w for w in warnings)


def test_a_policy_of_non_workloads_only_is_left_as_is_with_a_reason() -> None:
    only = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "settings"}]
    decision = decide(propagation_policy(selectors=only, clusters=NAMED),
                      PolicyInputs(ADMISSION_CONFIG.clusters, TABLE, carried=True))  # fmt: skip
    assert decision.changes == []
    assert decision.skipped is not None
    assert "selects no workload (ConfigMap)" in decision.skipped
    assert decision.warnings


def test_a_lazy_policy_is_marked_in_the_record_and_warned_about() -> None:
    obj = propagation_policy(clusters=NAMED)
    obj["spec"]["activationPreference"] = "Lazy"
    out, warnings = _decide(obj, carried=True)
    record = Record.decode(out["metadata"]["annotations"][DECISION])
    assert record.body["lazy"] is True
    assert any("activationPreference Lazy" in w for w in warnings)
