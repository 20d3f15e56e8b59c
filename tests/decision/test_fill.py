"""The default placement of Divided policies: ordered fill over overflow tiers, on a
Karmada API that keeps them (v1.18; the failover groups older ones keep:
test_fill_groups.py)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

from tests.decision.placements import divided, mutate, policy
from tests.support import FLEET, NOW, reading
from webhook.decision.hysteresis import Hysteresis
from webhook.decision.karmada.api import KarmadaApi
from webhook.decision.karmada.capacity import tier_fill
from webhook.decision.karmada.holding import in_force
from webhook.decision.karmada.placement import PolicyInputs, decide
from webhook.decision.karmada.terms import GREEN_TERM, OTHERS_TERM, fill_order, fill_tiers
from webhook.decision.record import Record
from webhook.model.config import parse
from webhook.model.vocabulary import DECISION

CONFIG = parse(FLEET)
V1_18 = KarmadaApi(True, "config", "1.18")
"""A Karmada API that keeps ``overflowAffinities``."""
TABLE = {"FR": reading("FR", 60.0), "DE": reading("DE", 380.0), "PL": reading("PL", 700.0)}
NAMED = {"clusterAffinity": {"clusterNames": ["member-pl", "member-de", "member-fr"]}}
AVAILABLE = {
    "replicaSchedulingType": "Divided",
    "replicaDivisionPreference": "Weighted",
    "weightPreference": {"dynamicWeight": "AvailableReplicas"},
}


def stored(obj: dict[str, Any], table: dict[str, Any] = TABLE) -> tuple[dict[str, Any], list[str]]:
    return mutate(obj, PolicyInputs(CONFIG.clusters, table, api=V1_18))


def placement_of(obj: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = obj["spec"]["placement"]
    return out


def test_a_plain_divided_policy_fills_the_greenest_first() -> None:
    out, warnings = stored(policy(divided() | NAMED))
    p = placement_of(out)
    assert "clusterAffinity" not in p
    assert p["replicaScheduling"] == AVAILABLE
    (term,) = p["clusterAffinities"]
    assert term["affinityName"] == GREEN_TERM
    assert term["clusterNames"] == ["member-fr"]
    assert [o["clusterNames"] for o in term["overflowAffinities"]] == [["member-de"], ["member-pl"]]
    assert fill_tiers(p) == [["member-fr"], ["member-de"], ["member-pl"]]
    record = Record.decode(out["metadata"]["annotations"][DECISION])
    assert {n: c["t"] for n, c in record.body["clusters"].items()} == {
        "member-fr": 0,
        "member-de": 1,
        "member-pl": 2,
    }
    assert not any("not applied" in w for w in warnings)


def test_an_open_selection_ends_with_a_tier_for_clusters_carbonshift_does_not_know() -> None:
    prod = {"clusterAffinity": {"labelSelector": {"matchLabels": {"tier": "prod"}}}}
    out, _ = stored(policy(divided() | prod))
    (term,) = placement_of(out)["clusterAffinities"]
    last = term["overflowAffinities"][-1]
    assert last["affinityName"] == OTHERS_TERM
    assert last["labelSelector"] == {"matchLabels": {"tier": "prod"}}
    assert last["exclude"] == ["member-de", "member-fr"]
    assert term["labelSelector"] == {"matchLabels": {"tier": "prod"}}


def test_max_clusters_share_the_first_tier_and_the_rest_still_overflows() -> None:
    out, _ = stored(policy(divided() | NAMED, **{"carbonshift.io/max-clusters": "2"}))
    assert fill_tiers(placement_of(out)) == [["member-fr", "member-de"], ["member-pl"]]


def test_max_intensity_leaves_dirty_clusters_out_of_every_tier() -> None:
    out, _ = stored(policy(divided() | NAMED, **{"carbonshift.io/max-intensity": "400"}))
    p = placement_of(out)
    assert fill_tiers(p) == [["member-fr"], ["member-de"]]
    assert "member-pl" in p["clusterAffinities"][0]["exclude"]


def test_the_users_dynamic_or_aggregated_division_is_kept() -> None:
    out, _ = stored(policy({**NAMED, "replicaScheduling": AVAILABLE}))
    assert placement_of(out)["replicaScheduling"] == AVAILABLE
    aggregated = {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"}
    out, _ = stored(policy({**NAMED, "replicaScheduling": aggregated}))
    assert placement_of(out)["replicaScheduling"] == aggregated
    assert fill_tiers(placement_of(out))


def test_what_keeps_the_fill_out_is_said_and_weights_are_used_where_they_can() -> None:
    spread = {"spreadConstraints": [{"spreadByField": "cluster", "minGroups": 2}]}
    _, warnings = stored(policy(divided() | NAMED | spread))
    assert any("ordered fill not applied: spreadConstraints" in w for w in warnings)
    terms = {"clusterAffinities": [{"affinityName": "mine", "clusterNames": ["member-de"]}]}
    out, warnings = stored(policy(divided() | terms))
    assert any("ordered fill not applied: the policy has its own" in w for w in warnings)
    assert "staticWeightList" in placement_of(out)["replicaScheduling"]["weightPreference"]


def test_duplicated_is_left_alone_unless_fill_is_asked_for() -> None:
    duplicated = {"replicaScheduling": {"replicaSchedulingType": "Duplicated"}}
    obj = policy(duplicated | NAMED)
    assert decide(obj, PolicyInputs(CONFIG.clusters, TABLE, api=V1_18)).changes == []
    _, warnings = stored(policy(duplicated | NAMED, **{"carbonshift.io/strategy": "fill"}))
    assert any("ordered fill not applied: Duplicated" in w for w in warnings)


def test_fill_named_on_a_policy_without_replica_scheduling_divides_it() -> None:
    out, _ = stored(policy(NAMED, **{"carbonshift.io/strategy": "fill"}))
    assert placement_of(out)["replicaScheduling"] == AVAILABLE


def test_equally_green_clusters_share_a_tier_and_unknown_ones_come_last() -> None:
    values = {"a": 10.0, "b": 10.0, "c": 30.0, "x": None, "y": None}
    assert fill_order(values) == [["a", "b"], ["c"], ["x", "y"]]
    assert fill_order(values, 1) == [["a"], ["b"], ["c"], ["x", "y"]]


def test_readmission_is_idempotent() -> None:
    out, _ = stored(policy(divided() | NAMED))
    assert decide(out, PolicyInputs(CONFIG.clusters, TABLE, api=V1_18)).changes == []


def test_the_hysteresis_sees_the_tier_order() -> None:
    out, _ = stored(policy(divided() | NAMED))
    weights = in_force(placement_of(out), None)
    assert weights is not None
    assert weights["member-fr"] > weights["member-de"] > weights["member-pl"]


def test_each_tier_weighs_twice_the_next_and_from_the_tenth_on_one() -> None:
    names = [f"c{k:02d}" for k in range(12)]
    overflow = [
        {"affinityName": f"carbonshift-tier-{k}", "clusterNames": [n]}
        for k, n in enumerate(names[1:], 1)
    ]
    term = {
        "affinityName": GREEN_TERM,
        "clusterNames": [names[0], "c99"],
        "overflowAffinities": overflow,
    }
    weights = in_force({"clusterAffinities": [term]}, None)
    assert weights == {"c00": 1024, "c99": 1024} | {
        n: 2 ** (10 - k) for k, n in enumerate(names[1:10], 1)
    } | {"c10": 1, "c11": 1}


def test_a_refresh_reorders_the_tiers_only_past_dwell_and_margin() -> None:
    obj = policy(divided() | NAMED)
    first, _ = mutate(obj, PolicyInputs(CONFIG.clusters, TABLE, now=NOW, api=V1_18))
    rule = Hysteresis(margin=0.1, dwell_hours=12)

    def refreshed(hours: float, **values: float) -> dict[str, Any]:
        table = dict(TABLE) | {z: dataclasses.replace(TABLE[z], value=v) for z, v in values.items()}
        inputs = PolicyInputs(
            CONFIG.clusters, table, hysteresis=rule, now=NOW + timedelta(hours=hours), api=V1_18
        )
        return mutate(first, inputs)[0]

    assert refreshed(2, PL=10.0) == first  # within the dwell
    assert refreshed(24, DE=370.0) == first  # same order
    moved = refreshed(24, PL=10.0)
    assert fill_tiers(placement_of(moved)) == [["member-pl"], ["member-fr"], ["member-de"]]


def test_green_first_by_room_overflows_to_the_next_greenest_not_the_dirtiest() -> None:
    # examples/30-...: strategy none, max-clusters, the user's own dynamicWeight.
    obj = policy(
        {**NAMED, "replicaScheduling": dict(AVAILABLE)},
        **{"carbonshift.io/strategy": "none", "carbonshift.io/max-clusters": "1"},
    )
    out, warnings = stored(obj)
    p = placement_of(out)
    assert p["replicaScheduling"] == AVAILABLE  # the division stays the user's
    (term,) = p["clusterAffinities"]
    assert term["affinityName"] == GREEN_TERM
    assert fill_tiers(p) == [["member-fr"], ["member-de"], ["member-pl"]]
    # member-fr holds 4 of 10: Karmada puts the rest on member-de, none on member-pl.
    room = {"member-fr": 4, "member-de": 20, "member-pl": 20}
    assert tier_fill(10, fill_tiers(p) or [], room) == {"member-fr": 4, "member-de": 6}
    assert not any("not applied" in w for w in warnings)


def test_max_intensity_by_room_fills_the_allowed_clusters_in_order() -> None:
    obj = policy(
        {**NAMED, "replicaScheduling": dict(AVAILABLE)},
        **{"carbonshift.io/strategy": "none", "carbonshift.io/max-intensity": "500"},
    )
    p = placement_of(stored(obj)[0])
    assert fill_tiers(p) == [["member-fr"], ["member-de"]]
    assert p["clusterAffinities"][0]["exclude"] == ["member-pl"]


def test_strategy_none_without_an_ordering_knob_writes_nothing() -> None:
    obj = policy(
        {**NAMED, "replicaScheduling": dict(AVAILABLE)}, **{"carbonshift.io/strategy": "none"}
    )
    assert placement_of(stored(obj)[0]) == {**NAMED, "replicaScheduling": AVAILABLE}
