"""Placement on the policies people actually write: the user's intent survives.

Each case reads the stored policy back as Karmada's scheduler would (which clusters each
affinity term can give replicas to, after the static weights) over a fleet that has one
more cluster than carbonshift's config knows (``member-new``, a prod cluster that joined
later), and checks:

- reach never widens (clusterNames, exclude, selectors, overflow, the user's weights);
- an open selection still reaches the cluster carbonshift does not know;
- spread constraints stay in force: no static weights written next to them, no term or
  exclusion below ``minGroups``;
- overflowAffinities stay valid (no static weights) and keep their clusters;
- nothing becomes unschedulable;
- whatever carbonshift declined is warned about and listed in the record (``left``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.decision.placements import mutate, policy, weights_of
from tests.support import FLEET, reading
from webhook.decision.karmada.placement import PolicyInputs, decide
from webhook.decision.karmada.terms import FALLBACK_TERM, GREEN_TERM
from webhook.decision.record import Record
from webhook.decision.selectors import allowed_clusters
from webhook.model.config import ClusterConfig, parse
from webhook.model.vocabulary import DECISION

NEWCOMER = "member-new"
UNIVERSE = parse(
    {
        **FLEET,
        "clusters": {
            **FLEET["clusters"],
            NEWCOMER: {
                "zone": "SE",
                "labels": {"tier": "prod"},
                "provider": "aws",
                "region": "eu-north-1",
                "zones": ["eu-north-1a"],
            },
        },
    }
).clusters
"""What Karmada knows: carbonshift's fleet plus a cluster that joined later."""
KNOWN = parse(FLEET).clusters
VALUES = {"member-fr": 60.0, "member-de": 380.0, "member-pl": 700.0}
OURS = (GREEN_TERM, FALLBACK_TERM)
WEIGHTED = {"carbonshift.io/strategy": "weighted"}


def _inputs() -> PolicyInputs:
    table = {"FR": reading("FR", 60.0), "DE": reading("DE", 380.0), "PL": reading("PL", 700.0)}
    return PolicyInputs(KNOWN, table)


# --- Karmada's reading of a placement ---------------------------------------------------


def _terms(placement: Mapping[str, Any]) -> list[Any]:
    return list(placement.get("clusterAffinities") or [placement.get("clusterAffinity")])


def _term_clusters(term: Any) -> set[str]:
    names = set(allowed_clusters(term, UNIVERSE))
    for extra in (term or {}).get("overflowAffinities") or []:
        names |= set(allowed_clusters(extra, UNIVERSE))
    return names


def _static_targets(placement: Mapping[str, Any]) -> list[Any] | None:
    scheduling = placement.get("replicaScheduling")
    if not isinstance(scheduling, dict):
        return None  # Duplicated
    if scheduling.get("replicaSchedulingType", "Divided") != "Divided":
        return None
    if scheduling.get("replicaDivisionPreference") == "Aggregated":
        return None
    preference = scheduling.get("weightPreference") or {}
    if preference.get("dynamicWeight") or not preference.get("staticWeightList"):
        return None
    return [e["targetCluster"] for e in preference["staticWeightList"]]


def reach(placement: Mapping[str, Any]) -> list[set[str]]:
    """Per term, the clusters Karmada can give replicas to (``getStaticWeightInfoList``:
    a candidate matching no static weight entry gets none, unless none matches any)."""
    targets = _static_targets(placement)
    out = []
    for term in _terms(placement):
        clusters = _term_clusters(term)
        if targets is not None:
            weighted = {
                n for n in clusters if any(n in allowed_clusters(t, UNIVERSE) for t in targets)
            }
            clusters = weighted or clusters
        out.append(clusters)
    return out


def _floors(placement: Mapping[str, Any]) -> tuple[int, int]:
    clusters = regions = 0
    for c in placement.get("spreadConstraints") or []:
        floor = c.get("minGroups") or 1
        if c.get("spreadByField", "cluster") == "cluster":
            clusters = max(clusters, floor)
        elif c["spreadByField"] == "region":
            regions = max(regions, floor)
    return clusters, regions


def _meets(names: set[str], floors: tuple[int, int], known: Mapping[str, ClusterConfig]) -> bool:
    """Whether ``names`` can form ``floors`` (clusters, regions) groups. Every reachable
    cluster is a group of its own, known to carbonshift or not; regions count only where
    carbonshift knows them."""
    regions = {known[n].region for n in names if n in known and known[n].region}
    return len(names) >= floors[0] and len(regions) >= floors[1]


# --- the invariants -------------------------------------------------------------------------


def check(obj: dict[str, Any]) -> tuple[dict[str, Any], list[str], Record | None]:
    """Mutate ``obj`` and assert every invariant; returns what was stored."""
    inputs = _inputs()
    decision = decide(copy.deepcopy(obj), inputs)
    stored, warnings = mutate(copy.deepcopy(obj), inputs)
    before = obj["spec"].get("placement") or {}
    after = stored["spec"].get("placement") or {}
    was, now = reach(before), reach(after)
    was_all, now_all = set().union(*was), set().union(*now)

    # Reach never widens; open selections keep unknown and future clusters; never empty.
    # With the user's static weights the first term is where replicas go while its weighted
    # clusters are feasible; a later term is tried only when none of them is, and then
    # Karmada weighs every feasible cluster of the user's own selection 1 as well.
    if _static_targets(before) is None:
        assert now_all <= was_all, (was, now)
    else:
        assert now[0] <= was_all, (was, now)
        assert now_all <= set().union(*map(_term_clusters, _terms(before))), (was, now)
    if NEWCOMER in was_all:
        assert NEWCOMER in now_all, (before, after)
    if was_all:
        assert now_all
    # Spread constraints stay; no static weights added next to them or to overflow.
    overflow = any(t.get("overflowAffinities") for t in before.get("clusterAffinities") or [])
    assert after.get("spreadConstraints") == before.get("spreadConstraints")
    if before.get("spreadConstraints") or overflow:
        assert after.get("replicaScheduling") == before.get("replicaScheduling")
    # overflowAffinities kept term by term (valid only with dynamic weight / Aggregated).
    kept_overflow = {
        t["affinityName"]: [o["affinityName"] for o in t.get("overflowAffinities") or []]
        for t in after.get("clusterAffinities") or []
    }
    for term in before.get("clusterAffinities") or []:
        if term.get("overflowAffinities"):
            names = [o["affinityName"] for o in term["overflowAffinities"]]
            assert kept_overflow.get(term["affinityName"]) == names
    # Never below minGroups where the user's placement met them.
    floors = _floors(before)
    if _meets(was_all, floors, KNOWN):
        for term, clusters in zip(_terms(after), now, strict=True):
            if term is None or term.get("affinityName") in (*OURS, None):
                assert _meets(clusters, floors, KNOWN), (term, clusters)
    # Shape Karmada accepts.
    assert not ("clusterAffinity" in after and "clusterAffinities" in after)
    names = [t["affinityName"] for t in after.get("clusterAffinities") or []]
    assert len(set(names)) == len(names)
    assert all(1 <= len(n) <= 32 for n in names)
    # Declined rules: a warning, and a record entry whenever a record is written.
    assert all(len(w) < 120 for w in warnings)
    record = Record.decode(stored["metadata"]["annotations"].get(DECISION))
    left = record.body.get("left") or [] if decision.changes else []
    declined = [w for w in warnings if " not applied: " in w]
    if decision.changes:
        assert len(left) == len(declined)
        for entry in left:
            assert any(entry["rule"] in w and entry["reason"] in w for w in declined)
        assert set(record.body["clusters"]) <= was_all | {"unknown-x"}
    # Idempotent.
    assert decide(stored, inputs).changes == []
    return stored, warnings, record if decision.changes else None


def _spread(*constraints: dict[str, Any]) -> dict[str, Any]:
    return {"spreadConstraints": list(constraints)}


def _divided(**extra: Any) -> dict[str, Any]:
    return {"replicaScheduling": {"replicaSchedulingType": "Divided", **extra}}


def _static(*names: str) -> dict[str, Any]:
    entries = [{"targetCluster": {"clusterNames": [n]}, "weight": 5} for n in names]
    return _divided(weightPreference={"staticWeightList": entries})


ONE_CLUSTER = {"spreadByField": "cluster", "maxGroups": 1, "minGroups": 1}
TWO_CLUSTERS = {"spreadByField": "cluster", "minGroups": 2}
PROD = {"labelSelector": {"matchLabels": {"tier": "prod"}}}
AGGREGATED = {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"}
OVERFLOW_TERMS = [
    {
        "affinityName": "primary",
        "clusterNames": ["member-fr"],
        "overflowAffinities": [{"affinityName": "burst", "clusterNames": ["member-pl"]}],
    }
]


# --- class 1: spread constraints -----------------------------------------------------------


@pytest.mark.parametrize(
    ("placement", "annotations"),
    [
        (_divided() | _spread(ONE_CLUSTER), {"carbonshift.io/max-intensity": "400"}),
        (
            _spread(ONE_CLUSTER),
            {"carbonshift.io/strategy": "weighted", "carbonshift.io/max-intensity": "400"},
        ),
        (
            _divided() | _spread(ONE_CLUSTER),
            {"carbonshift.io/override": "true", "carbonshift.io/max-clusters": "1"},
        ),
    ],
)
def test_static_weights_never_void_spread_constraints(
    placement: dict[str, Any], annotations: dict[str, str]
) -> None:
    stored, warnings, record = check(policy(placement, **annotations))
    assert "weightPreference" not in (stored["spec"]["placement"].get("replicaScheduling") or {})
    assert any("Karmada would ignore spreadConstraints under static weights" in w for w in warnings)
    assert record is not None
    assert {
        "rule": "carbon weights",
        "reason": "Karmada would ignore spreadConstraints under static weights",
    } in record.body["left"]


def test_green_term_holds_at_least_min_groups() -> None:
    obj = policy(_spread(TWO_CLUSTERS), **{"carbonshift.io/max-clusters": "1"})
    stored, warnings, _ = check(obj)
    terms = stored["spec"]["placement"]["clusterAffinities"]
    assert terms[0]["clusterNames"] == ["member-fr", "member-de"]
    assert any("greenest term has 2 clusters instead of 1" in w for w in warnings)


def test_region_groups_size_the_green_term_by_distinct_regions() -> None:
    region = {"spreadByField": "region", "minGroups": 2}
    named = {"clusterAffinity": {"clusterNames": ["member-fr", "member-de", "member-pl"]}}
    obj = policy(
        named | _spread(ONE_CLUSTER | {"maxGroups": 3}, region),
        **{"carbonshift.io/max-clusters": "1"},
    )
    stored, _, _ = check(obj)
    terms = stored["spec"]["placement"]["clusterAffinities"]
    assert terms[0]["clusterNames"] == ["member-fr", "member-de"]
    # The rest alone (member-pl) is one region: the fallback holds every candidate.
    assert terms[1]["clusterNames"] == ["member-fr", "member-de", "member-pl"]


def test_max_intensity_never_excludes_below_min_groups() -> None:
    obj = policy(_spread(TWO_CLUSTERS), **{"carbonshift.io/max-intensity": "100"})
    stored, warnings, record = check(obj)
    assert stored["spec"]["placement"]["clusterAffinity"]["exclude"] == ["member-pl"]
    assert any("member-de kept to meet spreadConstraints minGroups" in w for w in warnings)
    assert record is not None
    assert record.body["left"][0]["rule"] == "carbonshift.io/max-intensity"


def test_max_clusters_is_left_when_min_groups_cannot_be_met() -> None:
    obj = policy(
        _spread({"spreadByField": "cluster", "minGroups": 5}),
        **{"carbonshift.io/max-clusters": "1"},
    )
    decision = decide(obj, _inputs())
    assert decision.changes == []
    assert any(
        "max-clusters not applied: the candidates cannot meet" in w for w in decision.warnings
    )


# --- class 2: reach implied by the user's static weights ------------------------------------


def test_green_first_stays_within_the_users_weights() -> None:
    obj = policy(_static("member-de", "member-pl"), **{"carbonshift.io/max-clusters": "1"})
    stored, warnings, record = check(obj)
    assert stored["spec"]["placement"]["clusterAffinities"][0]["clusterNames"] == ["member-de"]
    assert (
        stored["spec"]["placement"]["replicaScheduling"]
        == _static("member-de", "member-pl")["replicaScheduling"]
    )
    assert any("static weights are kept, within the greenest term" in w for w in warnings)
    assert record is not None
    assert set(record.body["clusters"]) == {"member-de", "member-pl"}


def test_override_and_max_intensity_stay_within_the_users_weights() -> None:
    annotations = {"carbonshift.io/override": "true", "carbonshift.io/max-intensity": "500"}
    stored, _, record = check(policy(_static("member-de", "member-pl"), **annotations))
    assert weights_of(stored) == {"member-de": 100}
    assert stored["spec"]["placement"]["clusterAffinity"]["exclude"] == ["member-pl"]
    assert record is not None
    assert "member-fr" not in record.body["clusters"]


def test_weights_by_selector_stay_open_under_override() -> None:
    mine = {"staticWeightList": [{"targetCluster": PROD, "weight": 1}]}
    obj = policy(_divided(weightPreference=mine), **{"carbonshift.io/override": "true"})
    stored, _, record = check(obj)
    entries = stored["spec"]["placement"]["replicaScheduling"]["weightPreference"][
        "staticWeightList"
    ]
    assert set(weights_of(stored)) == {"member-fr", "member-de"}
    assert entries[-1]["targetCluster"] == {**PROD, "exclude": ["member-de", "member-fr"]}
    assert record is not None
    assert record.body["others"]["w"] == entries[-1]["weight"]


# --- class 3: overflow affinities -----------------------------------------------------------


def test_overflow_policies_get_no_static_weights_and_keep_their_overflow() -> None:
    placement = {"clusterAffinities": OVERFLOW_TERMS, "replicaScheduling": AGGREGATED}
    annotations = {"carbonshift.io/override": "true", "carbonshift.io/max-clusters": "1"}
    decision = decide(
        policy(placement, **annotations, **{"carbonshift.io/strategy": "weighted"}), _inputs()
    )
    assert decision.changes == []
    assert any(
        "max-clusters not applied: it would drop the policy's overflow" in w
        for w in decision.warnings
    )
    assert any(
        "overflowAffinities need dynamicWeight or Aggregated" in w for w in decision.warnings
    )


def test_max_intensity_reaches_overflow_clusters() -> None:
    placement = {"clusterAffinities": OVERFLOW_TERMS, "replicaScheduling": AGGREGATED}
    annotations = {"carbonshift.io/override": "true", "carbonshift.io/max-intensity": "400"}
    stored, _, _ = check(policy(placement, **annotations))
    term = stored["spec"]["placement"]["clusterAffinities"][0]
    assert term["overflowAffinities"][0]["exclude"] == ["member-pl"]
    assert stored["spec"]["placement"]["replicaScheduling"] == AGGREGATED


# --- class 4: selectors are not frozen ------------------------------------------------------


def test_green_first_fallback_keeps_the_users_selection() -> None:
    obj = policy({"clusterAffinity": PROD}, **{"carbonshift.io/max-clusters": "1"})
    stored, _, _ = check(obj)
    fallback = stored["spec"]["placement"]["clusterAffinities"][1]
    assert fallback == {"affinityName": FALLBACK_TERM, **PROD}


def test_static_weights_keep_unknown_clusters_of_an_open_selection() -> None:
    stored, _, record = check(policy(_divided(), **WEIGHTED))
    entries = stored["spec"]["placement"]["replicaScheduling"]["weightPreference"][
        "staticWeightList"
    ]
    catch_all = entries[-1]
    assert catch_all["targetCluster"] == {"exclude": ["member-de", "member-fr", "member-pl"]}
    # Unknown clusters weigh as unknown intensity does: as the mean of the known ones.
    assert weights_of(stored)["member-de"] == catch_all["weight"]
    assert record is not None
    assert record.body["others"] == {"w": catch_all["weight"]}


def test_named_clusters_get_no_catch_all() -> None:
    named = {"clusterAffinity": {"clusterNames": ["member-fr", "member-pl"]}}
    stored, _, _ = check(policy(_divided() | named, **WEIGHTED))
    entries = stored["spec"]["placement"]["replicaScheduling"]["weightPreference"][
        "staticWeightList"
    ]
    assert all(e["targetCluster"].get("clusterNames") for e in entries)


# --- properties -------------------------------------------------------------------------------

NAMES = ["member-fr", "member-de", "member-pl", "unknown-x"]
subsets = st.lists(st.sampled_from(NAMES), unique=True, max_size=4)


@st.composite
def affinities(draw: st.DrawFn) -> dict[str, Any]:
    affinity: dict[str, Any] = {}
    if draw(st.booleans()):
        affinity["clusterNames"] = draw(subsets.filter(bool))
    if draw(st.booleans()):
        affinity["exclude"] = draw(subsets)
    if draw(st.booleans()):
        affinity["labelSelector"] = {
            "matchLabels": {"tier": draw(st.sampled_from(["prod", "dev"]))}
        }
    if draw(st.booleans()):
        provider = draw(st.sampled_from(["aws", "gcp"]))
        affinity["fieldSelector"] = {
            "matchExpressions": [{"key": "provider", "operator": "In", "values": [provider]}]
        }
    return affinity


@st.composite
def schedulings(draw: st.DrawFn) -> dict[str, Any] | None:
    kind = draw(
        st.sampled_from(
            ["none", "duplicated", "divided", "aggregated", "dynamic", "static", "static-selector"]
        )
    )
    if kind == "none":
        return None
    if kind == "duplicated":
        return {"replicaSchedulingType": "Duplicated"}
    if kind == "aggregated":
        return dict(AGGREGATED)
    scheduling: dict[str, Any] = {"replicaSchedulingType": "Divided"}
    if kind == "dynamic":
        scheduling["weightPreference"] = {"dynamicWeight": "AvailableReplicas"}
    elif kind == "static":
        names = draw(subsets.filter(bool))
        entries = [{"targetCluster": {"clusterNames": [n]}, "weight": 3} for n in names]
        scheduling["weightPreference"] = {"staticWeightList": entries}
    elif kind == "static-selector":
        entries = [{"targetCluster": draw(affinities()), "weight": 2}]
        scheduling["weightPreference"] = {"staticWeightList": entries}
    return scheduling


@st.composite
def placements(draw: st.DrawFn) -> dict[str, Any]:
    placement: dict[str, Any] = {}
    scheduling = draw(schedulings())
    if scheduling is not None:
        placement["replicaScheduling"] = scheduling
    overflow_ok = scheduling is not None and (
        scheduling.get("replicaDivisionPreference") == "Aggregated"
        or (scheduling.get("weightPreference") or {}).get("dynamicWeight")
    )
    shape = draw(st.sampled_from(["none", "affinity", "terms"]))
    if shape == "affinity":
        placement["clusterAffinity"] = draw(affinities())
    elif shape == "terms":
        terms = []
        for i in range(draw(st.integers(1, 2))):
            term: dict[str, Any] = {"affinityName": f"t{i}", **draw(affinities())}
            if overflow_ok and any(k != "affinityName" for k in term) and draw(st.booleans()):
                term["overflowAffinities"] = [{"affinityName": f"o{i}", **draw(affinities())}]
            terms.append(term)
        placement["clusterAffinities"] = terms
    spread = draw(st.sampled_from(["none", "one", "two", "region"]))
    if spread == "one":
        placement["spreadConstraints"] = [ONE_CLUSTER]
    elif spread == "two":
        placement["spreadConstraints"] = [TWO_CLUSTERS]
    elif spread == "region":
        placement["spreadConstraints"] = [
            {"spreadByField": "cluster", "minGroups": 1},
            {"spreadByField": "region", "minGroups": draw(st.integers(1, 3))},
        ]
    return placement


annotation_sets = st.fixed_dictionaries(
    {},
    optional={
        "carbonshift.io/max-clusters": st.sampled_from(["1", "2", "5"]),
        "carbonshift.io/max-intensity": st.sampled_from(["50", "100", "400", "1000"]),
        "carbonshift.io/strategy": st.sampled_from(["fill", "weighted", "none"]),
        "carbonshift.io/override": st.sampled_from(["true", "false"]),
    },
)


@settings(max_examples=400, deadline=None)
@given(placements(), annotation_sets)
def test_the_users_intent_survives(placement: dict[str, Any], annotations: dict[str, str]) -> None:
    check(policy(placement, **annotations))


@settings(max_examples=200, deadline=None)
@given(placements(), annotation_sets)
def test_clusters_above_the_ceiling_stay_only_when_a_warning_says_so(
    placement: dict[str, Any], annotations: dict[str, str]
) -> None:
    limit = annotations.get("carbonshift.io/max-intensity")
    stored, warnings, _ = check(policy(placement, **annotations))
    if limit is None or any(
        "max-intensity not applied" in w or "placement left as is" in w for w in warnings
    ):
        return
    for name in set().union(*reach(stored["spec"].get("placement") or {})):
        if VALUES.get(name, 0.0) > float(limit):
            assert any(name in w for w in warnings), (name, warnings)


def test_override_puts_the_greenest_first_and_keeps_the_users_terms() -> None:
    terms = [
        {"affinityName": "mine", **PROD},
        {"affinityName": "dev", "clusterNames": ["member-pl"]},
    ]
    annotations = {"carbonshift.io/override": "true", "carbonshift.io/max-clusters": "1"}
    stored, _, _ = check(policy({"clusterAffinities": terms}, **annotations))
    written = stored["spec"]["placement"]["clusterAffinities"]
    assert written == [{"affinityName": GREEN_TERM, "clusterNames": ["member-fr"]}, *terms]


def test_a_ceiling_says_it_does_not_check_the_unweighted_clusters_a_fallback_keeps() -> None:
    """Static weights on member-fr only, max-clusters 1 and a ceiling below every cluster:
    the fallback keeps member-de (Karmada weighs it 1 when member-fr is infeasible), which
    was never a candidate, so the warning says the ceiling was not checked there."""
    placement = {
        **_divided(weightPreference={"staticWeightList": [
            {"targetCluster": {"clusterNames": ["member-fr"]}, "weight": 3}]}),
        "clusterAffinity": {"clusterNames": ["member-fr", "member-de"]},
    }  # fmt: skip
    annotations = {
        "carbonshift.io/max-clusters": "1",
        "carbonshift.io/override": "true",
        "carbonshift.io/max-intensity": "50",
    }
    stored, warnings, _ = check(policy(placement, **annotations))
    assert reach(stored["spec"]["placement"]) == [{"member-fr"}, {"member-de"}]
    assert any("not applied: fallback keeps member-de" in w for w in warnings), warnings
