"""Karmada's replica division, and how it reads a written placement, as the simulator does."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.decision.karmada.division import (
    divide_aggregated,
    divide_available,
    divide_static,
    fnv32a,
    names_descending,
    static_weights,
    webster,
)
from webhook.decision.karmada.view import PlacementView
from webhook.model.config import ClusterConfig
from webhook.simulate.policies import Members, Terms, Weights


def test_webster_matches_karmadas_comment_example() -> None:
    assert divide_static(9, {"a": 1, "b": 3}) == {"a": 2, "b": 7}


def test_webster_matches_the_sainte_lague_textbook_example() -> None:
    votes = {"A": 100_000, "B": 80_000, "C": 30_000, "D": 20_000}
    assert webster(8, votes) == {"A": 3, "B": 3, "C": 1, "D": 1}


def test_ties_prefer_fewer_seats_then_name_in_the_workloads_direction() -> None:
    assert webster(1, {"a": 1, "b": 1}) == {"a": 1, "b": 0}
    assert webster(1, {"a": 1, "b": 1}, descending=True) == {"a": 0, "b": 1}
    assert webster(3, {"a": 1, "b": 1, "c": 1}) == {"a": 1, "b": 1, "c": 1}


def test_static_division_drops_zero_weights_and_zero_replica_clusters() -> None:
    assert divide_static(4, {"a": 1, "b": 0}) == {"a": 4}
    assert divide_static(2, {"a": 0, "b": 0}) == {"a": 1, "b": 1}
    assert divide_static(1, {"a": 100, "b": 1}) == {"a": 1}


def test_available_division_respects_capacity_or_reports_unschedulable() -> None:
    assert divide_available(5, {"a": 1, "b": 10}) == {"b": 5}
    assert divide_available(3, {"a": 1, "b": 1}) is None
    # Webster on 11 seats over 1:10 gives a:1, b:10 - exactly the capacity.
    assert divide_available(12, {"a": 1, "b": 10}) is None
    assert divide_available(11, {"a": 1, "b": 10}) == {"a": 1, "b": 10}


def test_fnv32a_known_values() -> None:
    assert fnv32a("") == 0x811C9DC5
    assert fnv32a("a") == 0xE40C292C
    assert names_descending("a") is False


def _members() -> Members:
    tiers = {"a": "prod", "b": "prod", "c": "dev", "d": "prod"}
    return Members(
        {n: ClusterConfig(n, zone=n.upper(), labels={"tier": t}) for n, t in tiers.items()}
    )


def _static(*rules: tuple[dict[str, Any], int]) -> dict[str, Any]:
    return {
        "replicaSchedulingType": "Divided",
        "replicaDivisionPreference": "Weighted",
        "weightPreference": {
            "staticWeightList": [{"targetCluster": t, "weight": w} for t, w in rules]
        },
    }


def test_written_terms_read_as_karmada_schedules_them() -> None:
    written = {
        "clusterAffinities": [
            {"affinityName": "carbonshift-greenest", "clusterNames": ["b", "a"], "exclude": ["d"]},
            {"affinityName": "carbonshift-fallback", "clusterNames": ["c", "d"], "exclude": ["d"]},
        ],
        # Karmada: a cluster's weight is its highest matching rule.
        "replicaScheduling": _static(
            ({"clusterNames": ["a"]}, 5), ({"labelSelector": {"matchLabels": {"tier": "prod"}}}, 2)
        ),
    }
    assert _members().intent(written) == Terms(
        terms=(("b", "a"), ("c",)),
        weights=(("a", 5), ("b", 2), ("d", 2)),
    )


def test_a_written_weight_list_reads_over_the_allowed_clusters_only() -> None:
    affinity = {"clusterNames": ["a", "b", "c"], "exclude": ["c"]}
    weighted = {
        "clusterAffinity": affinity,
        "replicaScheduling": _static(({"clusterNames": ["a"]}, 3), ({"clusterNames": ["c"]}, 9)),
    }
    # b has no rule (no replicas), c is excluded.
    assert _members().intent(weighted) == Weights((("a", 3),))
    # No rule matches an allowed cluster: Karmada weighs them all 1.
    unmatched = {
        "clusterAffinity": affinity,
        "replicaScheduling": _static(({"clusterNames": ["d"]}, 4)),
    }
    assert _members().intent(unmatched) == Weights((("a", 1), ("b", 1)))


def test_aggregated_division_packs_the_fewest_clusters_most_room_first() -> None:
    assert divide_aggregated(8, {"a": 5, "b": 10, "c": 3}) == {"b": 8}
    assert divide_aggregated(12, {"a": 5, "b": 10, "c": 3}) == {"b": 8, "a": 4}
    assert divide_aggregated(19, {"a": 5, "b": 10, "c": 3}) is None
    assert divide_aggregated(0, {"a": 5}) == {}
    assert divide_aggregated(4, {"b": 5, "a": 5}) == {"a": 4}  # equal rooms: by name


def _allowed(affinity: Mapping[str, Any] | None) -> list[str]:
    return _members().allowed(affinity)


def test_static_weights_are_read_only_where_karmada_divides_by_them() -> None:
    listed = _static(({"clusterNames": ["a"]}, 3), ({"clusterNames": ["b"]}, 1))
    assert static_weights(PlacementView.of({"replicaScheduling": listed}), _allowed) == {
        "a": 3,
        "b": 1,
    }
    # Aggregated ignores weightPreference (newAssignState: AggregatedStrategy).
    aggregated = {**listed, "replicaDivisionPreference": "Aggregated"}
    placement = {"clusterAffinity": {"clusterNames": ["a", "b"]}, "replicaScheduling": aggregated}
    assert static_weights(PlacementView.of(placement), _allowed) is None
    # ...so the simulator divides it by room over every allowed cluster, not 3:1 over a and b.
    assert _members().intent(placement) == Terms(terms=(("a", "b"),))
    # A dynamicWeight wins over the list; Duplicated has no weights.
    both = {
        **listed,
        "weightPreference": {**listed["weightPreference"], "dynamicWeight": "AvailableReplicas"},
    }
    assert static_weights(PlacementView.of({"replicaScheduling": both}), _allowed) is None
    duplicated = {**listed, "replicaSchedulingType": "Duplicated"}
    assert static_weights(PlacementView.of({"replicaScheduling": duplicated}), _allowed) is None
