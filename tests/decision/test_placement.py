"""Karmada placement decisions: candidates, weights, green-first terms, limits, ownership."""

from __future__ import annotations

import copy
import dataclasses
from datetime import timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.decision.placements import divided, mutate, policy, weights_of
from tests.support import FLEET, NOW, reading
from webhook.decision.hysteresis import Hysteresis
from webhook.decision.karmada.placement import PolicyInputs, decide
from webhook.decision.record import Record
from webhook.decision.selectors import allowed_clusters
from webhook.model.config import Config, parse
from webhook.model.intensity import Reading
from webhook.model.vocabulary import DECISION

NAMES = ["member-fr", "member-de", "member-pl", "unknown-x"]
WEIGHTED = {"carbonshift.io/strategy": "weighted"}
"""Static carbon weights instead of the default ordered fill (``tests/decision/test_fill.py``)."""


def test_divided_policy_gets_weighted_division_greener_higher(
    config: Config, table: dict[str, Reading]
) -> None:
    stored, warnings = mutate(policy(divided(), **WEIGHTED), PolicyInputs(config.clusters, table))
    scheduling = stored["spec"]["placement"]["replicaScheduling"]
    assert scheduling["replicaDivisionPreference"] == "Weighted"
    w = weights_of(stored)
    assert w["member-fr"] > w["member-de"] > w["member-pl"] >= 1
    assert warnings == []
    record = Record.decode(stored["metadata"]["annotations"][DECISION])
    assert record.body["clusters"]["member-fr"] == {"zone": "FR", "g": 60.0, "est": False, "w": 100}
    assert record.body["provider"] == "test"


def test_duplicated_policy_gets_no_weights(config: Config, table: dict[str, Reading]) -> None:
    obj = policy({"replicaScheduling": {"replicaSchedulingType": "Duplicated"}})
    decision = decide(obj, PolicyInputs(config.clusters, table))
    assert decision.changes == []
    obj = policy(None, **{"carbonshift.io/strategy": "weighted"})
    stored, _ = mutate(obj, PolicyInputs(config.clusters, table))
    assert stored["spec"]["placement"]["replicaScheduling"]["replicaSchedulingType"] == "Divided"


def test_weights_only_cover_clusters_the_policy_allows(
    config: Config, table: dict[str, Reading]
) -> None:
    placement = divided() | {"clusterAffinity": {"clusterNames": ["member-de", "member-pl"]}}
    stored, _ = mutate(policy(placement, **WEIGHTED), PolicyInputs(config.clusters, table))
    assert set(weights_of(stored)) == {"member-de", "member-pl"}
    placement = divided() | {
        "clusterAffinity": {"labelSelector": {"matchLabels": {"tier": "prod"}}}
    }
    stored, _ = mutate(policy(placement, **WEIGHTED), PolicyInputs(config.clusters, table))
    assert set(weights_of(stored)) == {"member-fr", "member-de"}


def test_max_clusters_builds_ordered_terms_keeping_selectors(
    config: Config, table: dict[str, Reading]
) -> None:
    placement = {
        "clusterAffinity": {
            "fieldSelector": {
                "matchExpressions": [
                    {"key": "provider", "operator": "In", "values": ["aws", "gcp"]}
                ]
            }
        }
    }
    obj = policy(placement, **{"carbonshift.io/max-clusters": "1"})
    stored, _ = mutate(obj, PolicyInputs(config.clusters, table))
    p = stored["spec"]["placement"]
    assert "clusterAffinity" not in p
    terms = p["clusterAffinities"]
    # The fallback is the user's selection itself: clusters carbonshift does not know match.
    assert [t.get("clusterNames") for t in terms] == [["member-fr"], None]
    assert all(t["fieldSelector"] == placement["clusterAffinity"]["fieldSelector"] for t in terms)
    named = {"clusterNames": ["member-fr", "member-de", "member-pl"]}
    stored, _ = mutate(
        policy({"clusterAffinity": named}, **{"carbonshift.io/max-clusters": "1"}),
        PolicyInputs(config.clusters, table),
    )
    terms = stored["spec"]["placement"]["clusterAffinities"]
    assert [t["clusterNames"] for t in terms] == [["member-fr"], ["member-de", "member-pl"]]
    assert all(len(t["affinityName"]) <= 32 for t in terms)


def test_max_intensity_excludes_dirty_clusters_and_keeps_the_greenest_if_all_are(
    config: Config, table: dict[str, Reading]
) -> None:
    obj = policy(divided(), **WEIGHTED, **{"carbonshift.io/max-intensity": "400"})
    stored, _ = mutate(obj, PolicyInputs(config.clusters, table))
    assert stored["spec"]["placement"]["clusterAffinity"]["exclude"] == ["member-pl"]
    assert set(weights_of(stored)) == {"member-fr", "member-de"}
    obj = policy(divided(), **WEIGHTED, **{"carbonshift.io/max-intensity": "10"})
    stored, warnings = mutate(obj, PolicyInputs(config.clusters, table))
    assert stored["spec"]["placement"]["clusterAffinity"]["exclude"] == ["member-de", "member-pl"]
    assert any("keeping member-fr" in w for w in warnings)


def test_user_fields_are_never_overwritten_without_override(
    config: Config, table: dict[str, Reading]
) -> None:
    mine = {"staticWeightList": [{"targetCluster": {"clusterNames": ["member-pl"]}, "weight": 5}]}
    placement = {
        "replicaScheduling": {"replicaSchedulingType": "Divided", "weightPreference": mine}
    }
    decision = decide(policy(placement), PolicyInputs(config.clusters, table))
    assert decision.changes == []
    assert any("own static weights are kept" in w for w in decision.warnings)
    stored, _ = mutate(
        policy(placement, **{"carbonshift.io/override": "true"}),
        PolicyInputs(config.clusters, table),
    )
    # The user's weights give only member-pl replicas: override never reaches further.
    assert weights_of(stored) == {"member-pl": 100}

    terms = [{"affinityName": "mine", "clusterNames": ["member-pl"]}]
    decision = decide(
        policy({"clusterAffinities": terms}, **{"carbonshift.io/max-clusters": "1"}),
        PolicyInputs(config.clusters, table),
    )
    assert decision.changes == []
    assert any("the policy has its own clusterAffinities" in w for w in decision.warnings)


def test_unknown_zones_and_stale_data_warn_briefly(
    config: Config, table: dict[str, Reading]
) -> None:
    table = dict(table)
    del table["PL"]
    table["DE"] = dataclasses.replace(table["DE"], stale=True)
    placement = divided() | {"clusterAffinity": {"clusterNames": [*NAMES]}}
    decision = decide(policy(placement), PolicyInputs(config.clusters, table))
    assert any("no intensity data for member-pl, unknown-x" in w for w in decision.warnings)
    assert any("stale intensity data for member-de" in w for w in decision.warnings)
    assert all(len(w) < 120 for w in decision.warnings)


def test_resubmitting_the_mutated_object_gives_no_patch(
    config: Config, table: dict[str, Reading]
) -> None:
    annotations = {"carbonshift.io/max-clusters": "2", "carbonshift.io/max-intensity": "500"}
    inputs = PolicyInputs(config.clusters, table)
    stored, _ = mutate(policy(divided(), **annotations), inputs)
    assert decide(stored, inputs).changes == []


def test_a_refresh_recomputes_from_the_users_placement(
    config: Config, table: dict[str, Reading]
) -> None:
    inputs = PolicyInputs(config.clusters, table)
    obj = policy(divided(), **WEIGHTED, **{"carbonshift.io/max-clusters": "1"})
    stored, _ = mutate(obj, inputs)
    greener_pl = dict(table) | {"PL": dataclasses.replace(table["PL"], value=10.0)}
    again, _ = mutate(stored, PolicyInputs(config.clusters, greener_pl))
    terms = again["spec"]["placement"]["clusterAffinities"]
    assert terms[0]["clusterNames"] == ["member-pl"]
    assert weights_of(again)["member-pl"] == 100


selector_values = st.lists(st.sampled_from(NAMES), unique=True, max_size=4)


@st.composite
def placements(draw: st.DrawFn) -> dict[str, Any]:
    affinity: dict[str, Any] = {}
    if draw(st.booleans()):
        affinity["clusterNames"] = draw(selector_values)
    if draw(st.booleans()):
        affinity["exclude"] = draw(selector_values)
    if draw(st.booleans()):
        affinity["labelSelector"] = {
            "matchLabels": {"tier": draw(st.sampled_from(["prod", "dev"]))}
        }
    placement: dict[str, Any] = {}
    if affinity or draw(st.booleans()):
        placement["clusterAffinity"] = affinity
    if draw(st.booleans()):
        placement["replicaScheduling"] = {"replicaSchedulingType": "Divided"}
    return placement


annotation_sets = st.fixed_dictionaries(
    {},
    optional={
        "carbonshift.io/max-clusters": st.sampled_from(["1", "2", "5", "x"]),
        "carbonshift.io/max-intensity": st.sampled_from(["50", "400", "1000", "-1"]),
        "carbonshift.io/strategy": st.sampled_from(["fill", "weighted", "none", "bogus"]),
    },
)


def _named(stored: dict[str, Any]) -> set[str]:
    placement = stored["spec"].get("placement") or {}
    names: set[str] = set()
    for term in placement.get("clusterAffinities") or []:
        names |= set(term.get("clusterNames") or [])
    weights = (placement.get("replicaScheduling") or {}).get("weightPreference") or {}
    for entry in weights.get("staticWeightList") or []:
        names |= set(entry["targetCluster"].get("clusterNames") or [])
    return names


@settings(max_examples=150, deadline=None)
@given(placements(), annotation_sets)
def test_never_widens_and_is_idempotent(
    placement: dict[str, Any], annotations: dict[str, str]
) -> None:
    config = parse(FLEET)
    table = {"FR": reading("FR", 60.0), "DE": reading("DE", 380.0), "PL": reading("PL", 700.0)}
    inputs = PolicyInputs(config.clusters, table)
    obj = policy(copy.deepcopy(placement), **annotations)
    stored, warnings = mutate(obj, inputs)

    allowed = set(allowed_clusters(placement.get("clusterAffinity"), config.clusters))
    assert _named(stored) <= allowed
    p = stored["spec"].get("placement") or {}
    assert not ("clusterAffinity" in p and "clusterAffinities" in p)
    assert all(1 <= len(t["affinityName"]) <= 32 for t in p.get("clusterAffinities") or [])
    for entry in ((p.get("replicaScheduling") or {}).get("weightPreference") or {}).get(
        "staticWeightList"
    ) or []:
        assert entry["weight"] >= 1
    assert all(len(w) < 120 for w in warnings)
    assert decide(stored, inputs).changes == []


def _refreshed(
    stored: dict[str, Any], config: Config, table: dict[str, Reading], hours: float
) -> tuple[dict[str, Any], list[str]]:
    """Recompute ``stored`` ``hours`` after its decision, with hysteresis 10% / 12 h."""
    inputs = PolicyInputs(
        config.clusters,
        table,
        hysteresis=Hysteresis(margin=0.1, dwell_hours=12),
        now=NOW + timedelta(hours=hours),
    )
    return mutate(stored, inputs)


def test_a_refresh_keeps_the_placement_within_the_dwell_time_and_margin(
    config: Config, table: dict[str, Reading]
) -> None:
    obj = policy(divided(), **WEIGHTED, **{"carbonshift.io/max-clusters": "1"})
    stored, _ = mutate(obj, PolicyInputs(config.clusters, table, now=NOW))
    assert Record.decode(stored["metadata"]["annotations"][DECISION]).body["since"]
    # DE gets a little greener: new weights, but the greenest term (where Karmada places
    # the replicas) is the same, so the placement in force stays as written.
    cleaner_de = dict(table) | {"DE": dataclasses.replace(table["DE"], value=340.0)}
    again, warnings = _refreshed(stored, config, cleaner_de, hours=24)
    assert again == stored
    assert not any("placement kept" in w for w in warnings)
    # PL becomes the greenest, but the placement on PL is not 10% greener.
    slightly = dict(table) | {"PL": dataclasses.replace(table["PL"], value=56.0)}
    again, warnings = _refreshed(stored, config, slightly, hours=24)
    assert again == stored
    assert any("not 10% greener" in w for w in warnings)
    # DE becomes much greener, but the placement has been in force for 2 h only.
    much = dict(table) | {"DE": dataclasses.replace(table["DE"], value=10.0)}
    again, warnings = _refreshed(stored, config, much, hours=2)
    assert again == stored
    assert any("in force 2.0 h of 12 h" in w for w in warnings)
    # After the dwell time, a much greener placement wins.
    again, _ = _refreshed(stored, config, much, hours=13)
    assert again["spec"]["placement"]["clusterAffinities"][0]["clusterNames"] == ["member-de"]
    assert weights_of(again)["member-de"] == 100
