"""The ordered fill on a Karmada API without ``overflowAffinities`` (before v1.18, and the
default without a cluster connection): ordered ``clusterAffinities`` failover groups, term
k holding tiers 0 to k, divided by available replicas; what an older API server pruned of
an overflow fill is told apart from a user's edit and decided again."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import pytest

from tests.decision.placements import divided, mutate, policy
from tests.support import FLEET, NOW, reading
from webhook.decision.karmada.api import GROUPS, KarmadaApi
from webhook.decision.karmada.holding import in_force
from webhook.decision.karmada.placement import PolicyInputs, decide
from webhook.decision.karmada.pruning import AFFINITIES, dropped
from webhook.decision.karmada.terms import (
    GREEN_TERM,
    OTHERS_TERM,
    fill_tiers,
    group_name,
    regrouped,
    round_of,
)
from webhook.decision.karmada.view import PlacementView, fill_of, group_index
from webhook.decision.record import Record
from webhook.model.config import parse
from webhook.model.vocabulary import DECISION

CONFIG = parse(FLEET)
TABLE = {"FR": reading("FR", 60.0), "DE": reading("DE", 380.0), "PL": reading("PL", 700.0)}
NAMED = {"clusterAffinity": {"clusterNames": ["member-pl", "member-de", "member-fr"]}}
PROD = {"clusterAffinity": {"labelSelector": {"matchLabels": {"tier": "prod"}}}}
AVAILABLE = {
    "replicaSchedulingType": "Divided",
    "replicaDivisionPreference": "Weighted",
    "weightPreference": {"dynamicWeight": "AvailableReplicas"},
}
V1_16 = KarmadaApi(False, "config", "1.16")
V1_18 = KarmadaApi(True, "config", "1.18")


def stored(
    obj: dict[str, Any], api: KarmadaApi = GROUPS, **options: Any
) -> tuple[dict[str, Any], list[str]]:
    return mutate(obj, PolicyInputs(CONFIG.clusters, TABLE, api=api, **options))


def placement_of(obj: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = obj["spec"]["placement"]
    return out


def record_of(obj: dict[str, Any]) -> Record:
    return Record.decode(obj["metadata"]["annotations"][DECISION])


def pruned(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as an API server without ``overflowAffinities`` stores it."""
    out = copy.deepcopy(obj)
    for term in out["spec"]["placement"]["clusterAffinities"]:
        term.pop("overflowAffinities", None)
    return out


@pytest.mark.parametrize("api", [GROUPS, V1_16])
def test_each_term_adds_the_next_greener_tier(api: KarmadaApi) -> None:
    out, warnings = stored(policy(divided() | NAMED), api)
    p = placement_of(out)
    assert "clusterAffinity" not in p
    assert p["replicaScheduling"] == AVAILABLE
    assert [(t["affinityName"], t["clusterNames"]) for t in p["clusterAffinities"]] == [
        (GREEN_TERM, ["member-fr"]),
        ("carbonshift-group-1", ["member-fr", "member-de"]),
        ("carbonshift-group-2", ["member-fr", "member-de", "member-pl"]),
    ]
    assert not any("overflowAffinities" in t for t in p["clusterAffinities"])
    assert fill_tiers(p) == [["member-fr"], ["member-de"], ["member-pl"]]
    assert fill_of(p) == ([["member-fr"], ["member-de"], ["member-pl"]], "groups")
    assert PlacementView.of(p).fill_shape == "groups"
    record = record_of(out)
    assert {n: c.tier for n, c in record.clusters.items()} == {
        "member-fr": 0,
        "member-de": 1,
        "member-pl": 2,
    }
    assert record.body["shape"] == "groups"
    assert record.body["karmada"] == api.why
    assert not any("not applied" in w for w in warnings)


def test_the_default_is_the_shape_every_release_keeps() -> None:
    assert PolicyInputs(CONFIG.clusters, TABLE).api == GROUPS
    assert GROUPS.shape == "groups"
    assert "no cluster connection" in GROUPS.why


def test_from_v1_18_the_fill_is_one_term_with_overflow_tiers() -> None:
    out, _ = stored(policy(divided() | NAMED), V1_18)
    (term,) = placement_of(out)["clusterAffinities"]
    assert [o["clusterNames"] for o in term["overflowAffinities"]] == [["member-de"], ["member-pl"]]
    assert record_of(out).body["shape"] == "overflow"
    assert fill_of(placement_of(out))[1] == "overflow"


def test_an_open_selection_keeps_its_own_selection_as_the_last_group() -> None:
    out, _ = stored(policy(divided() | PROD))
    terms = placement_of(out)["clusterAffinities"]
    prod = {"matchLabels": {"tier": "prod"}}
    assert [t["affinityName"] for t in terms] == [GREEN_TERM, "carbonshift-group-1", OTHERS_TERM]
    assert all(t["labelSelector"] == prod for t in terms)
    assert terms[-1] == {"affinityName": OTHERS_TERM, "labelSelector": prod}  # no names
    assert fill_tiers(placement_of(out)) == [["member-fr"], ["member-de"]]


def test_max_clusters_share_the_first_group() -> None:
    out, _ = stored(policy(divided() | NAMED, **{"carbonshift.io/max-clusters": "2"}))
    terms = placement_of(out)["clusterAffinities"]
    assert [t["clusterNames"] for t in terms] == [
        ["member-fr", "member-de"],
        ["member-fr", "member-de", "member-pl"],
    ]


def test_max_intensity_leaves_dirty_clusters_out_of_every_group() -> None:
    out, _ = stored(policy(divided() | NAMED, **{"carbonshift.io/max-intensity": "400"}))
    terms = placement_of(out)["clusterAffinities"]
    assert [t["clusterNames"] for t in terms] == [["member-fr"], ["member-fr", "member-de"]]
    assert all("member-pl" in t["exclude"] for t in terms)


def test_readmission_is_idempotent_and_the_hysteresis_sees_the_order() -> None:
    out, _ = stored(policy(divided() | NAMED))
    assert decide(out, PolicyInputs(CONFIG.clusters, TABLE)).changes == []
    weights = in_force(placement_of(out), None)
    assert weights["member-fr"] > weights["member-de"] > weights["member-pl"]


def test_the_same_tiers_in_the_other_shape_are_held_by_the_hysteresis() -> None:
    first, _ = stored(policy(divided() | NAMED), V1_18, now=NOW)
    later = NOW + timedelta(hours=48)
    decision = decide(first, PolicyInputs(CONFIG.clusters, TABLE, api=GROUPS, now=later))
    assert decision.changes == []  # the same order, not greener: the shape in force stays


@pytest.mark.parametrize("selection", [NAMED, PROD])
def test_overflow_an_older_api_pruned_is_no_edit_and_becomes_groups(
    selection: dict[str, Any],
) -> None:
    written, _ = stored(policy(divided() | selection), V1_18, now=NOW)
    cut = pruned(written)
    assert cut != written
    assert dropped(placement_of(cut), record_of(cut)) == {AFFINITIES: "overflowAffinities"}
    assert dropped(placement_of(written), record_of(written)) == {}
    # decided again at once, as carbonshift's, in failover groups whatever the API says
    decision = decide(cut, PolicyInputs(CONFIG.clusters, TABLE, api=V1_18, now=NOW))
    assert not any("own clusterAffinities" in w for w in decision.warnings)
    (change,) = [c for c in decision.changes if c.path[-1] == "clusterAffinities"]
    names = [t["affinityName"] for t in change.value]
    assert names[:2] == [GREEN_TERM, "carbonshift-group-1"]
    assert decision.record is not None
    assert decision.record.body["shape"] == "groups"
    assert "dropped" in decision.record.body["karmada"]


def test_a_users_edit_of_the_one_term_is_not_a_drop() -> None:
    written, _ = stored(policy(divided() | NAMED), V1_18, now=NOW)
    edited = pruned(written)
    edited["spec"]["placement"]["clusterAffinities"][0]["clusterNames"] = ["member-de"]
    assert dropped(placement_of(edited), record_of(edited)) == {}
    renamed = copy.deepcopy(written)
    renamed["spec"]["placement"]["clusterAffinities"][0]["affinityName"] = "mine"
    assert dropped(placement_of(renamed), record_of(renamed)) == {}
    two = copy.deepcopy(written)
    two["spec"]["placement"]["clusterAffinities"].append({"affinityName": "x"})
    assert dropped(placement_of(two), record_of(two)) == {}
    assert dropped(placement_of(policy(divided() | NAMED)), Record()) == {}


def test_the_leaders_move_back_renames_the_groups_and_decisions_keep_the_names() -> None:
    out, _ = stored(policy(divided() | PROD))
    p, record = placement_of(out), record_of(out)
    assert round_of(record) == 0
    renamed = regrouped(p, record)
    assert renamed is not None
    terms, new = renamed
    assert [t["affinityName"] for t in terms] == [
        GREEN_TERM,
        "carbonshift-group-1-r1",
        "carbonshift-others-r1",
    ]
    assert round_of(new) == 1
    assert new.owns(AFFINITIES, terms)
    moved = copy.deepcopy(out)
    moved["spec"]["placement"]["clusterAffinities"] = terms
    moved["metadata"]["annotations"][DECISION] = new.encode()
    assert fill_of(placement_of(moved)) == ([["member-fr"], ["member-de"]], "groups")
    # a decision of the renamed policy writes the same names (nothing to change)
    assert decide(moved, PolicyInputs(CONFIG.clusters, TABLE)).changes == []
    again = regrouped(placement_of(moved), new)
    assert again is not None
    assert again[0][1]["affinityName"] == "carbonshift-group-1-r2"
    # an overflow fill, or terms someone else wrote, are not renamed
    overflow, _ = stored(policy(divided() | NAMED), V1_18)
    assert regrouped(placement_of(overflow), record_of(overflow)) is None
    assert regrouped(placement_of(out), Record()) is None


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        ("carbonshift-group-3", (3, 0)),
        ("carbonshift-group-3-r12", (3, 12)),
        (OTHERS_TERM, (None, 0)),
        ("carbonshift-others-r2", (None, 2)),
        ("carbonshift-group-x", None),
        ("carbonshift-group-", None),
        ("carbonshift-tier-1", None),
        ("mine-r2", None),
    ],
)
def test_group_names(name: str, parsed: tuple[int | None, int] | None) -> None:
    assert group_index(name) == parsed
    if parsed is not None:
        k, round_ = parsed
        assert group_name(k or 0, round_, others=k is None) == name


def test_green_first_with_static_weights_is_no_fill() -> None:
    terms = [
        {"affinityName": GREEN_TERM, "clusterNames": ["a"]},
        {"affinityName": "carbonshift-group-1", "clusterNames": ["a", "b"]},
    ]
    weights = {"staticWeightList": [{"targetCluster": {"clusterNames": ["a"]}, "weight": 1}]}
    listed = {"clusterAffinities": terms, "replicaScheduling": {"weightPreference": weights}}
    assert fill_of(listed) == (None, None)
    assert fill_of({"clusterAffinities": [*terms, {"affinityName": "mine"}]}) == (None, None)
    assert fill_of({"clusterAffinities": terms}) == ([["a"], ["b"]], "groups")
    assert fill_of({}) == (None, None)
