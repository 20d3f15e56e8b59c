"""The one reading of a Karmada placement (``webhook/decision/karmada/view.py``), held to
Karmada v1.18.2's own rules for every ``replicaScheduling`` x affinity shape of the upstream
corpus (``tests/corpus/``), and for the shapes beyond it that Karmada reads differently from
what they spell.

The rules, with the defaults a stored policy has gone through (the CRD's
``replicaSchedulingType: Divided``, karmada-webhook's ``replicaDivisionPreference:
Weighted``): ``newAssignState`` (``pkg/scheduler/core/assignment.go``) picks the strategy,
``assignByStaticWeightStrategy`` / ``getDefaultWeightPreference`` weigh every cluster 1
without a list, ``IsOverflowSchedulingAllowed`` (``pkg/util/policy.go``) says where
``overflowAffinities`` go.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import pytest

from tests.semantics import fleet
from webhook.decision.karmada.view import GREEN_TERM, Division, PlacementView, green_terms


class Expected(NamedTuple):
    division: Division
    overflow_allowed: bool
    by_room: bool
    divides_by_list: bool
    """Karmada divides by the written staticWeightList (its targets are the reach)."""


DUPLICATED = Expected(Division.DUPLICATED, False, False, False)
AGGREGATED = Expected(Division.AGGREGATED, True, True, False)
DYNAMIC = Expected(Division.DYNAMIC_WEIGHT, True, True, False)
STATIC = Expected(Division.STATIC_WEIGHT, False, False, True)
EVEN = Expected(Division.EVEN, False, False, False)

SCHEDULING: dict[str, Expected] = {
    "absent": DUPLICATED,  # Placement.ReplicaSchedulingType(): nil is Duplicated
    "Duplicated": DUPLICATED,
    "Divided": EVEN,  # karmada-webhook: Weighted; no weightPreference: every cluster 1
    "Divided/Weighted": EVEN,
    "Divided/Weighted+static": STATIC,
    "Divided/Weighted+dynamic": DYNAMIC,
    "Divided/Aggregated": AGGREGATED,
}
"""Karmada's reading of each ``replicaScheduling`` shape the corpus holds."""

AFFINITY = ("none", "clusterAffinity", "clusterAffinities", "clusterAffinities+overflow")


def scheduling_shape(placement: Mapping[str, Any]) -> str:
    rules = placement.get("replicaScheduling")
    if rules is None:
        return "absent"
    kind = rules.get("replicaSchedulingType", "Divided")
    if kind != "Divided":
        return str(kind)
    preference = rules.get("replicaDivisionPreference")
    if preference is None:
        return "Divided"
    weights = rules.get("weightPreference") or {}
    extra = "+dynamic" if weights.get("dynamicWeight") else ""
    extra += "+static" if weights.get("staticWeightList") else ""
    return f"Divided/{preference}{extra}"


def affinity_shape(placement: Mapping[str, Any]) -> str:
    terms = placement.get("clusterAffinities")
    if terms:
        overflow = any("overflowAffinities" in t for t in terms)
        return "clusterAffinities+overflow" if overflow else "clusterAffinities"
    return "clusterAffinity" if "clusterAffinity" in placement else "none"


def pl(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    out: Mapping[str, Any] = (obj.get("spec") or {}).get("placement") or {}
    return out


POLICIES = [
    s for s in fleet.corpus() if s.kind in ("PropagationPolicy", "ClusterPropagationPolicy")
]
SHAPES = sorted({(scheduling_shape(p), affinity_shape(p)) for p in (pl(s.obj) for s in POLICIES)})


def test_the_corpus_holds_every_shape_the_table_knows_and_no_other() -> None:
    assert {s for s, _ in SHAPES} == set(SCHEDULING)
    assert {a for _, a in SHAPES} == set(AFFINITY)


@pytest.mark.parametrize("shape", SHAPES, ids=["x".join(s) for s in SHAPES])
def test_every_corpus_shape_reads_as_karmada_schedules_it(shape: tuple[str, str]) -> None:
    samples = [
        s for s in POLICIES if (scheduling_shape(pl(s.obj)), affinity_shape(pl(s.obj))) == shape
    ]
    assert samples
    want = SCHEDULING[shape[0]]
    for sample in samples:
        placement = pl(sample.obj)
        view = PlacementView.of(placement)
        got = Expected(view.division, view.overflow_allowed, view.by_room, view.reach is not None)
        assert got == want, sample.id
        assert got == karmada(placement), sample.id
        assert view.scheduling == (shape[0] != "absent")
        _check_weights(view, placement)
        _check_terms(view, placement, shape[1])
        assert view.fill_tiers is None, sample.id  # no upstream policy is carbonshift's fill


def karmada(placement: Mapping[str, Any]) -> Expected:
    """``newAssignState`` + ``IsOverflowSchedulingAllowed`` transliterated, on the object
    as stored (CRD and karmada-webhook defaults applied)."""
    rules = placement.get("replicaScheduling")
    if rules is None:
        return DUPLICATED
    kind = rules.get("replicaSchedulingType") or "Divided"  # +kubebuilder:default=Divided
    preference = rules.get("replicaDivisionPreference") or "Weighted"  # mutating webhook
    weights = rules.get("weightPreference")
    if kind == "Duplicated":
        strategy = "Duplicated"
    elif preference == "Aggregated":
        strategy = "Aggregated"
    elif weights is not None and weights.get("dynamicWeight"):
        strategy = "DynamicWeight"
    else:
        strategy = "StaticWeight"
    allowed = kind == "Divided" and (
        preference == "Aggregated" or (weights is not None and bool(weights.get("dynamicWeight")))
    )
    listed = strategy == "StaticWeight" and bool((weights or {}).get("staticWeightList"))
    division = {
        "Duplicated": Division.DUPLICATED,
        "Aggregated": Division.AGGREGATED,
        "DynamicWeight": Division.DYNAMIC_WEIGHT,
        "StaticWeight": Division.STATIC_WEIGHT if listed else Division.EVEN,
    }[strategy]
    room = strategy == "Aggregated" or (
        strategy == "DynamicWeight" and weights is not None
        and weights["dynamicWeight"] == "AvailableReplicas"
    )  # fmt: skip
    return Expected(division, allowed, room, listed)


def _check_weights(view: PlacementView, placement: Mapping[str, Any]) -> None:
    listed = ((placement.get("replicaScheduling") or {}).get("weightPreference") or {}).get(
        "staticWeightList"
    ) or []
    if view.division is Division.STATIC_WEIGHT:
        assert [(w.target, w.weight) for w in view.static_weights] == [
            (e["targetCluster"], e["weight"]) for e in listed
        ]
        assert view.reach == tuple(e["targetCluster"] for e in listed)
    else:
        assert view.static_weights == ()
        assert view.reach is None
    assert view.lists_weights == bool(listed)
    dynamic = view.division is Division.DYNAMIC_WEIGHT
    assert (view.dynamic_weight == "AvailableReplicas") == dynamic


def _check_terms(view: PlacementView, placement: Mapping[str, Any], shape: str) -> None:
    terms = placement.get("clusterAffinities") or []
    assert [t.name for t in view.terms] == [t["affinityName"] for t in terms]
    assert [t.affinity for t in view.terms] == terms
    assert [t.overflow for t in view.terms] == [
        None if t.get("overflowAffinities") is None else tuple(t["overflowAffinities"])
        for t in terms
    ]
    assert view.has_overflow == (shape == "clusterAffinities+overflow")
    if terms:
        assert view.affinity is None
    else:
        assert view.affinity == placement.get("clusterAffinity")


# --- beyond the corpus: what Karmada reads differently from what is written ----------------

STATIC_LIST = {"staticWeightList": [{"targetCluster": {"clusterNames": ["a"]}, "weight": 2}]}
DYNAMIC_WEIGHT = {"dynamicWeight": "AvailableReplicas"}

BEYOND: list[tuple[str, dict[str, Any], Expected]] = [
    # Aggregated ignores weightPreference: neither the list nor a dynamic weight counts.
    ("aggregated-with-a-list",
     {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated",
      "weightPreference": STATIC_LIST}, AGGREGATED),
    ("aggregated-with-dynamic",
     {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated",
      "weightPreference": DYNAMIC_WEIGHT}, AGGREGATED),
    # "If specified, StaticWeightList will be ignored."
    ("dynamic-over-a-list",
     {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
      "weightPreference": {**STATIC_LIST, **DYNAMIC_WEIGHT}}, DYNAMIC),
    # No preference: karmada-webhook sets Weighted, so the list (or dynamic weight) counts.
    ("no-preference-with-a-list",
     {"replicaSchedulingType": "Divided", "weightPreference": STATIC_LIST}, STATIC),
    ("no-preference-with-dynamic",
     {"replicaSchedulingType": "Divided", "weightPreference": DYNAMIC_WEIGHT}, DYNAMIC),
    # replicaSchedulingType defaults to Divided (CRD), weights then even.
    ("empty-scheduling", {}, EVEN),
    ("empty-list",
     {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
      "weightPreference": {"staticWeightList": []}}, EVEN),
    # Duplicated ignores every preference.
    ("duplicated-with-a-list",
     {"replicaSchedulingType": "Duplicated", "replicaDivisionPreference": "Weighted",
      "weightPreference": STATIC_LIST}, DUPLICATED),
]  # fmt: skip


@pytest.mark.parametrize(
    ("scheduling", "want"), [c[1:] for c in BEYOND], ids=[c[0] for c in BEYOND]
)
def test_shapes_beyond_the_corpus_read_as_karmada_schedules_them(
    scheduling: dict[str, Any], want: Expected
) -> None:
    placement = {"replicaScheduling": scheduling}
    view = PlacementView.of(placement)
    got = Expected(view.division, view.overflow_allowed, view.by_room, view.reach is not None)
    assert got == want == karmada(placement)
    assert view.lists_weights == bool((scheduling.get("weightPreference") or {}).get(
        "staticWeightList"
    ))  # fmt: skip


def test_open_selections_are_the_ones_unnamed_clusters_can_match() -> None:
    assert PlacementView.of({}).opened  # no affinity: every cluster
    assert not PlacementView.of({"clusterAffinity": {"clusterNames": ["a"]}}).opened
    labels = {"labelSelector": {"matchLabels": {"tier": "prod"}}}
    assert PlacementView.of({"clusterAffinity": labels}).opened
    overflowing = {
        "clusterAffinities": [
            {"affinityName": "x", "clusterNames": ["a"], "overflowAffinities": [labels]}
        ]
    }
    assert PlacementView.of(overflowing).opened
    assert PlacementView.of(overflowing).has_overflow


def test_carbonshifts_ordered_fill_reads_back_as_its_tiers() -> None:
    fill = {
        "clusterAffinities": [
            {
                "affinityName": GREEN_TERM,
                "clusterNames": ["a"],
                "overflowAffinities": [
                    {"affinityName": "carbonshift-tier-1", "clusterNames": ["b", "c"]},
                    {"affinityName": "carbonshift-others", "exclude": ["a", "b", "c"]},
                ],
            }
        ],
        "replicaScheduling": {
            "replicaSchedulingType": "Divided",
            "weightPreference": DYNAMIC_WEIGHT,
        },
    }
    assert PlacementView.of(fill).fill_tiers == [["a"], ["b", "c"]]
    # One tier: every candidate equally green.
    alone = {**fill, "clusterAffinities": [{"affinityName": GREEN_TERM, "clusterNames": ["a"]}]}
    assert PlacementView.of(alone).fill_tiers == [["a"]]
    # Green-first with static weights, or followed by a fallback term: no fill.
    weighted = {**alone, "replicaScheduling": {"weightPreference": STATIC_LIST}}
    assert PlacementView.of(weighted).fill_tiers is None
    fallback = {"affinityName": "carbonshift-fallback", "clusterNames": ["b"]}
    two = {"clusterAffinities": [*alone["clusterAffinities"], fallback]}
    assert PlacementView.of(two).fill_tiers is None
    assert PlacementView.of(two).term(GREEN_TERM) is not None
    assert PlacementView.of(two).term("missing") is None
    for placement in (fill, alone, weighted, two, *(pl(s.obj) for s in POLICIES)):
        view = PlacementView.of(placement)
        assert green_terms(placement) == (view.fill_tiers, view.term(GREEN_TERM))
