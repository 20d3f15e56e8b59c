"""Carbon accounting core: energy, emissions, the counterfactual and what was avoided,
against answers computed by hand (watts 2.12 W/vCPU, 0.5 vCPU per replica, 2 hours: one
replica uses 2.12 x 0.5 x 2 / 1000 = 0.00212 kWh)."""

from __future__ import annotations

from typing import Any

import pytest

from webhook import testing
from webhook.decision.accounting import (
    Coefficients,
    Intensity,
    PodJoules,
    Totals,
    account,
    energy_kwh,
    measured,
    owns_pod,
    workload_joules,
)
from webhook.decision.karmada.accounting import counterfactual_placement, user_placement
from webhook.decision.karmada.terms import GREEN_TERM, TIER_TERM
from webhook.decision.karpenter.accounting import nodepool_zones
from webhook.decision.record import Record, fingerprint
from webhook.model.errors import MixedSignals
from webhook.model.intensity import Signal
from webhook.model.vocabulary import DECISION

AVG = Signal.AVERAGE
GREEN, DIRTY = Intensity(100.0, AVG, "static"), Intensity(300.0, AVG, "static")
INTENSITIES = {"a": GREEN, "b": DIRTY}
CCF = Coefficients()
PER_REPLICA = 0.00212

FILL = {
    "clusterAffinities": [{
        "affinityName": GREEN_TERM, "clusterNames": ["a"],
        "overflowAffinities": [{"affinityName": f"{TIER_TERM}1", "clusterNames": ["b"]}],
    }],
    "replicaScheduling": {"replicaSchedulingType": "Divided",
                          "replicaDivisionPreference": "Weighted",
                          "weightPreference": {"dynamicWeight": "AvailableReplicas"}},
}  # fmt: skip


def managed(user: dict[str, Any], written: dict[str, Any] = FILL) -> dict[str, Any]:
    """A policy carbonshift rewrote: ``written`` in force, ``user``'s fields in ``orig``."""
    record = Record(body={"clusters": {"a": {"zone": "A"}, "b": {"zone": "B"}}})
    for field in set(user) | set(written):
        if user.get(field) != written.get(field):
            record.orig["placement." + field] = user.get(field)
            record.own["placement." + field] = fingerprint(written.get(field))
    annotations = {DECISION: record.encode()}
    return testing.propagation_policy(namespace="shop", annotations=annotations, placement=written)


DIVIDED = {"replicaScheduling": {"replicaSchedulingType": "Divided"}}


def test_energy_follows_the_ccf_formula() -> None:
    assert energy_kwh(0.5, 2, CCF) == pytest.approx(PER_REPLICA)
    assert energy_kwh(1, 1, Coefficients(watts_per_vcpu=3.5, pue=1.135)) == pytest.approx(
        3.5 * 1.135 / 1000
    )


def test_the_counterfactual_is_the_users_own_division() -> None:
    policy = managed(DIVIDED)
    assert user_placement(policy) == DIVIDED
    assert counterfactual_placement(policy, 4) == {"a": 2, "b": 2}  # even split
    weights = {"replicaScheduling": {
        "replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
        "weightPreference": {"staticWeightList": [
            {"targetCluster": {"clusterNames": ["a"]}, "weight": 1},
            {"targetCluster": {"clusterNames": ["b"]}, "weight": 3},
        ]},
    }}  # fmt: skip
    assert counterfactual_placement(managed(weights), 4) == {"a": 1, "b": 3}
    assert counterfactual_placement(managed({}), 3) == {"a": 3, "b": 3}  # Duplicated
    # The user's own overflow tiers with dynamic weights fill by room (tier_fill).
    own_fill = {**FILL, "clusterAffinities": [{
        "affinityName": "mine", "clusterNames": ["b"],
        "overflowAffinities": [{"affinityName": "more", "clusterNames": ["a"]}],
    }]}  # fmt: skip
    assert counterfactual_placement(managed(own_fill), 5, room={"a": 10, "b": 3}) == {
        "b": 3,
        "a": 2,
    }
    # No decision record: nothing to compare with.
    assert counterfactual_placement({"metadata": {}, "spec": {}}, 4) is None


AGGREGATED = {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"}
ROOMS = {"a": 5, "b": 10, "c": 3}


def over_three(user: dict[str, Any]) -> dict[str, Any]:
    """A policy carbonshift filled over a, b and c; ``user``'s placement in ``orig``."""
    written = {**FILL, "clusterAffinities": [{
        "affinityName": GREEN_TERM, "clusterNames": ["a"],
        "overflowAffinities": [{"affinityName": f"{TIER_TERM}1", "clusterNames": ["b", "c"]}],
    }]}  # fmt: skip
    record = Record(body={"clusters": {n: {"zone": n.upper()} for n in ROOMS}})
    for field in set(user) | set(written):
        if user.get(field) != written.get(field):
            record.orig["placement." + field] = user.get(field)
            record.own["placement." + field] = fingerprint(written.get(field))
    annotations = {DECISION: record.encode()}
    return testing.propagation_policy(namespace="shop", annotations=annotations, placement=written)


def test_an_aggregated_counterfactual_packs_the_fewest_clusters_most_room_first() -> None:
    # Karmada's Aggregated (dynamicDivideReplicas): clusters by available replicas,
    # descending, as few as hold them; then divided by room among those.
    policy = over_three({"replicaScheduling": AGGREGATED})
    assert counterfactual_placement(policy, 8, room=ROOMS) == {"b": 8}
    assert counterfactual_placement(policy, 10, room=ROOMS) == {"b": 10}
    assert counterfactual_placement(policy, 12, room=ROOMS) == {"b": 8, "a": 4}
    assert counterfactual_placement(policy, 19, room=ROOMS) is None  # unschedulable
    # Without the room Karmada's choice cannot be told.
    assert counterfactual_placement(policy, 8) is None
    # A weightPreference under Aggregated is ignored (not static weights, not an even split).
    listed = {**AGGREGATED, "weightPreference": {"staticWeightList": [
        {"targetCluster": {"clusterNames": ["a"]}, "weight": 1},
        {"targetCluster": {"clusterNames": ["c"]}, "weight": 1},
    ]}}  # fmt: skip
    assert counterfactual_placement(over_three({"replicaScheduling": listed}), 8, room=ROOMS) == {
        "b": 8
    }


def test_an_aggregated_counterfactual_with_overflow_tiers_packs_tier_by_tier() -> None:
    tiers = {
        "clusterAffinities": [{
            "affinityName": "mine", "clusterNames": ["a"],
            "overflowAffinities": [{"affinityName": "more", "clusterNames": ["b", "c"]}],
        }],
        "replicaScheduling": AGGREGATED,
    }  # fmt: skip
    # a holds 5; the other 3 go to the fewest clusters of the next tier: b.
    assert counterfactual_placement(over_three(tiers), 8, room=ROOMS) == {"a": 5, "b": 3}
    assert counterfactual_placement(over_three(tiers), 4, room=ROOMS) == {"a": 4}


def test_a_dynamic_weight_overrides_a_static_list_in_the_counterfactual() -> None:
    both = {**AGGREGATED, "replicaDivisionPreference": "Weighted", "weightPreference": {
        "dynamicWeight": "AvailableReplicas",
        "staticWeightList": [{"targetCluster": {"clusterNames": ["c"]}, "weight": 1}],
    }}  # fmt: skip
    got = counterfactual_placement(over_three({"replicaScheduling": both}), 9, room=ROOMS)
    assert got == {"a": 2, "b": 5, "c": 2}  # Webster by room (5:10:3), the list ignored


def test_avoided_is_counterfactual_minus_actual_by_hand() -> None:
    got = account({"a": 4}, {"a": 2, "b": 2}, INTENSITIES, vcpu_per_replica=0.5, hours=2,
                  coefficients=CCF)  # fmt: skip
    assert got.actual.kwh == pytest.approx(4 * PER_REPLICA)
    assert got.actual.grams == pytest.approx(4 * PER_REPLICA * 100)  # 0.848 g
    assert got.counterfactual.kwh == pytest.approx(4 * PER_REPLICA)
    assert got.counterfactual.grams == pytest.approx(2 * PER_REPLICA * 100 + 2 * PER_REPLICA * 300)
    assert got.avoided_grams == pytest.approx(0.848)
    assert (got.actual.signal, got.actual.method, got.actual.provider) == (
        AVG,
        "coefficient",
        "static",
    )


def test_kepler_joules_replace_the_coefficient() -> None:
    # 36 kJ measured = 0.01 kWh for 4 replicas: 0.0025 kWh each, wherever they would run.
    got = account({"a": 4}, {"a": 2, "b": 2}, INTENSITIES, vcpu_per_replica=0.5, hours=2,
                  coefficients=CCF, joules={"a": 36_000.0})  # fmt: skip
    assert got.actual.method == got.counterfactual.method == "kepler"
    assert got.actual.kwh == pytest.approx(0.01)
    assert got.actual.grams == pytest.approx(1.0)
    assert got.counterfactual.grams == pytest.approx(0.005 * 100 + 0.005 * 300)
    assert got.avoided_grams == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("kind", "pod", "owned"),
    [
        ("Deployment", "web-7d9c5b8f6d-x2x9q", True),
        ("Deployment", "web-api-7d9c5b8f6d-x2x9q", False),  # the workload web-api
        ("Deployment", "web-x2x9q", False),
        ("StatefulSet", "web-0", True),
        ("StatefulSet", "web-api-0", False),
        ("DaemonSet", "web-x2x9q", True),
        ("Deployment", "webby-7d9c5b8f6d-x2x9q", False),
    ],
)
def test_a_workloads_pods_are_told_by_the_names_controllers_give(
    kind: str, pod: str, owned: bool
) -> None:
    assert owns_pod(kind, "web", pod) is owned


def test_workload_joules_sum_its_pods_per_cluster_and_need_every_cluster() -> None:
    pods = [
        PodJoules("a", "shop", "web-7d9c5b8f6d-aaaaa", 10.0),
        PodJoules("a", "shop", "web-7d9c5b8f6d-bbbbb", 5.0),
        PodJoules("b", "shop", "web-7d9c5b8f6d-ccccc", 7.0),
        PodJoules("a", "other", "web-7d9c5b8f6d-ddddd", 99.0),
        PodJoules("a", "shop", "web-api-7d9c5b8f6d-eeeee", 99.0),
    ]
    got = workload_joules(pods, "Deployment", "shop", "web")
    assert got == {"a": 15.0, "b": 7.0}
    assert measured(got, {"a": 2, "b": 1}) == {"a": 15.0, "b": 7.0}
    # Replicas on a cluster Kepler does not cover: the whole figure is estimated.
    assert measured(got, {"a": 2, "c": 1}) is None
    assert measured({}, {"a": 1}) is None


def test_embodied_is_added_to_both_and_never_changes_what_is_avoided() -> None:
    off = account({"a": 4}, {"a": 2, "b": 2}, INTENSITIES, vcpu_per_replica=0.5, hours=2,
                  coefficients=CCF)  # fmt: skip
    on = account({"a": 4}, {"a": 2, "b": 2}, INTENSITIES, vcpu_per_replica=0.5, hours=2,
                 coefficients=Coefficients(embodied_g_per_vcpu_hour=0.479))  # fmt: skip
    assert on.actual.embodied_grams == pytest.approx(4 * 0.5 * 2 * 0.479)  # 1.916 g
    assert on.actual.grams == pytest.approx(off.actual.grams + 1.916)
    assert on.avoided_grams == pytest.approx(off.avoided_grams)
    assert off.actual.embodied_grams == 0


def test_mixed_signals_are_refused() -> None:
    marginal = {"a": GREEN, "b": Intensity(300.0, Signal.MARGINAL, "watttime")}
    with pytest.raises(MixedSignals, match="average, marginal"):
        account({"a": 2, "b": 2}, {"a": 2, "b": 2}, marginal, vcpu_per_replica=1, hours=1,
                coefficients=CCF)  # fmt: skip
    totals = Totals()
    totals.add(account({"a": 1}, {"b": 1}, INTENSITIES, vcpu_per_replica=1, hours=1,
                       coefficients=CCF), 1)  # fmt: skip
    other = account({"b": 1}, {"b": 1}, marginal, vcpu_per_replica=1, hours=1, coefficients=CCF)
    with pytest.raises(MixedSignals, match="report them apart"):
        totals.add(other, 1)
    kepler = account({"a": 1}, {"a": 1}, INTENSITIES, vcpu_per_replica=1, hours=1,
                     coefficients=CCF, joules={"a": 3600.0})  # fmt: skip
    with pytest.raises(MixedSignals, match="kepler"):
        totals.add(kepler, 1)


def test_totals_round_trip_and_percent_saved() -> None:
    totals = Totals()
    totals.add(account({"a": 4}, {"a": 2, "b": 2}, INTENSITIES, vcpu_per_replica=0.5, hours=2,
                       coefficients=CCF), 2)  # fmt: skip
    assert totals.saved_percent == pytest.approx(50.0)  # 0.848 of 1.696
    again = Totals.from_json(totals.to_json())
    assert again == totals
    assert Totals.from_json({"signal": "bogus"}) == Totals()


def test_nodepool_counterfactual_zones_are_the_users_requirements() -> None:
    zone = "topology.kubernetes.io/zone"
    user = [{"key": zone, "operator": "In", "values": ["z-a", "z-b", "z-c"]}]
    written = [{"key": zone, "operator": "In", "values": ["z-a"]}]
    record = Record(body={"zone": "A"}, orig={"template.requirements": user},
                    own={"template.requirements": fingerprint(written)})  # fmt: skip
    pool = {
        "metadata": {"name": "p", "annotations": {DECISION: record.encode()}},
        "spec": {"template": {"spec": {"requirements": written}}},
    }
    topology = {"z-a": "A", "z-b": "B", "z-d": "D"}
    assert nodepool_zones(pool, topology) == ["z-a", "z-b"]
