"""Liqo NamespaceOffloading: the clusterSelector narrowed to green remote clusters, never
widened, owned as policies' fields are, and followed over time by the leader's step."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support import NOW, reading
from webhook import kinds
from webhook.decision.follow import apply
from webhook.decision.hysteresis import Hysteresis
from webhook.decision.labels import Rule
from webhook.decision.liqo import offloading
from webhook.decision.record import Record
from webhook.kinds.reevaluation import Reevaluation, target_of
from webhook.model.config import ClusterConfig, Config, HysteresisConfig
from webhook.model.intensity import IntensityTable
from webhook.model.vocabulary import DECISION

RULE = Rule(low_below=200, high_from=400)
PEERS = {
    "c-se": ClusterConfig(name="c-se", zone="SE-SE3", labels={"tier": "prod"}),
    "c-fr": ClusterConfig(name="c-fr", zone="FR", labels={"tier": "prod"}),
    "c-pl": ClusterConfig(name="c-pl", zone="PL", labels={"tier": "dev"}),
    "c-xx": ClusterConfig(name="c-xx", labels={"tier": "prod"}),  # no grid zone
}
ID = "liqo.io/remote-cluster-id"


def table(**values: float) -> IntensityTable:
    zones = {"SE": "SE-SE3", "FR": "FR", "PL": "PL"}
    return {zones[k]: reading(zones[k], v) for k, v in values.items()}


GRID = table(SE=30, FR=50, PL=700)


def nso(
    selector: Mapping[str, Any] | None = None,
    name: str = "offloading",
    annotations: Mapping[str, str] | None = None,
    **spec: str,
) -> dict[str, Any]:
    body: dict[str, Any] = dict(spec)
    if selector is not None:
        body["clusterSelector"] = dict(selector)
    return {
        "apiVersion": "offloading.liqo.io/v1beta1",
        "kind": "NamespaceOffloading",
        "metadata": {"name": name, "namespace": "apps", "annotations": dict(annotations or {})},
        "spec": body,
    }


def decide(obj: Mapping[str, Any], grid: IntensityTable = GRID, **extra: Any) -> Any:
    inputs = offloading.OffloadingInputs(PEERS, grid, RULE, **extra)
    return offloading.decide(obj, inputs)


def stored(obj: Mapping[str, Any], decision: Any) -> dict[str, Any]:
    """``obj`` as admission leaves it: the changes and the decision annotation."""
    out = apply(obj, decision.changes)
    out["metadata"]["annotations"][DECISION] = decision.record.encode()
    return out


def term(*expressions: Mapping[str, Any]) -> dict[str, Any]:
    return {"nodeSelectorTerms": [{"matchExpressions": [dict(e) for e in expressions]}]}


def only(*ids: str) -> dict[str, Any]:
    return {"key": ID, "operator": "In", "values": list(ids)}


def test_every_remote_cluster_allowed_narrows_to_the_low_class() -> None:
    decision = decide(nso())
    assert [c.path for c in decision.changes] == [("spec", "clusterSelector")]
    assert decision.changes[0].value == term(only("c-fr", "c-se"))
    record = decision.record
    assert record.orig == {"offloading.clusterSelector": None}
    weights = {n: c["w"] for n, c in record.body["clusters"].items()}
    assert weights == {"c-fr": 1, "c-pl": 0, "c-se": 1, "c-xx": 0}
    assert any("no intensity data for c-xx" in w for w in decision.warnings)


def test_the_users_terms_are_kept_and_only_ever_narrowed() -> None:
    dev_or_fr = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["dev"]}]},
            {"matchExpressions": [only("c-fr")]},
        ]
    }
    decision = decide(nso(dev_or_fr))
    new = decision.changes[0].value
    assert new == {
        "nodeSelectorTerms": [
            {"matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["dev"]}, only("c-fr"),
            ]},
            {"matchExpressions": [only("c-fr"), only("c-fr")]},
        ]
    }  # fmt: skip
    assert offloading.allowed(new, PEERS) == ["c-fr"]


@given(
    st.dictionaries(st.sampled_from(["SE", "FR", "PL"]), st.floats(0, 1500), min_size=1),
    st.lists(st.sampled_from(sorted(PEERS)), max_size=4),
    st.sampled_from(["prod", "dev", None]),
)
def test_the_selector_never_allows_a_cluster_the_user_did_not(
    values: dict[str, float], ids: list[str], tier: str | None
) -> None:
    expressions = [only(*ids)] if ids else []
    if tier is not None:
        expressions.append({"key": "tier", "operator": "In", "values": [tier]})
    user = term(*expressions)
    decision = decide(nso(user), table(**values))
    if decision.changes:
        assert set(offloading.allowed(decision.changes[0].value, PEERS)) <= set(
            offloading.allowed(user, PEERS)
        )
        assert offloading.allowed(decision.changes[0].value, PEERS)  # never empty


@pytest.mark.parametrize(
    ("obj", "why"),
    [
        (nso(name="other"), "named offloading"),
        (nso(podOffloadingStrategy="Local"), "Local"),
    ],
)
def test_what_liqo_would_not_offload_is_not_decided(obj: dict[str, Any], why: str) -> None:
    decision = decide(obj)
    assert not decision.changes
    assert why in (decision.skipped or "")


@pytest.mark.parametrize(
    ("selector", "grid", "why"),
    [
        (term({"key": "tier", "operator": "In", "values": ["none"]}), GRID, "allows no known"),
        ({"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["n"]}]}]},
         GRID, "matchFields"),
        (term({"key": "tier", "operator": "Gt", "values": ["1"]}), GRID, "operator"),
        (None, {}, "no intensity data"),
    ],
)  # fmt: skip
def test_what_cannot_be_judged_is_left_as_is_and_recorded(
    selector: Mapping[str, Any] | None, grid: IntensityTable, why: str
) -> None:
    decision = decide(nso(selector), grid)
    assert not decision.changes
    assert why in (decision.skipped or "")
    assert decision.record.body["left"][0]["rule"] == "clusterSelector"


def test_max_intensity_keeps_the_peers_within_the_limit() -> None:
    decision = decide(nso(annotations={"carbonshift.io/max-intensity": "40"}))
    assert decision.changes[0].value == term(only("c-se"))
    decision = decide(nso(annotations={"carbonshift.io/max-intensity": "10"}))
    assert decision.changes[0].value == term(only("c-se"))  # all above: the greenest stays


def test_the_grid_flips_and_the_selector_follows_from_the_users_own() -> None:
    user = term({"key": "tier", "operator": "In", "values": ["prod", "dev"]})
    first = stored(nso(user), decide(nso(user)))
    flipped = table(SE=900, FR=800, PL=20)
    decision = decide(first, flipped, now=NOW + timedelta(hours=2))
    assert decision.changes[0].value == term(user["nodeSelectorTerms"][0]["matchExpressions"][0],
                                             only("c-pl"))  # fmt: skip
    assert decision.record.orig == {"offloading.clusterSelector": user}


def test_hysteresis_keeps_the_green_set_within_the_margin_and_the_dwell() -> None:
    first = stored(nso(), decide(nso()))
    rule = Hysteresis(margin=0.2, dwell_hours=1)
    # PL greenest now, but the set in force has not dwelt an hour yet.
    soon = decide(first, table(SE=900, FR=900, PL=20), hysteresis=rule, now=NOW)
    assert not soon.changes
    assert "in force 0.0 h of 1 h" in soon.warnings[-1]
    # A day later all three are low, a few % greener than the set in force: kept.
    later = decide(first, table(SE=100, FR=100, PL=90), hysteresis=rule, now=NOW + timedelta(1))
    assert not later.changes
    assert "not 20% greener" in later.warnings[-1]
    moved = decide(first, table(SE=300, FR=300, PL=20), hysteresis=rule, now=NOW + timedelta(1))
    assert moved.changes[0].value == term(only("c-pl"))


def test_a_user_edit_is_the_users_and_the_leader_follows_the_grid_by_the_step() -> None:
    config = Config(hysteresis=HysteresisConfig(margin=0.1, dwell_hours=0))
    target = target_of("offloading.liqo.io/v1beta1", "NamespaceOffloading")
    assert target is not None
    rules = Reevaluation(config)
    obj = stored(nso(), decide(nso()))
    obj["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    enabled = {"carbonshift.io/enabled": "true"}

    def context(grid: IntensityTable) -> kinds.Context:
        return kinds.Context(config, grid, NOW, peers=PEERS)

    assert rules.decide(target, obj, context(GRID), enabled).outcome == "kept"
    action = rules.decide(target, obj, context(table(SE=900, FR=900, PL=20)), enabled)
    assert action.outcome == "switched"
    assert action.applied(obj)["spec"]["clusterSelector"] == term(only("c-pl"))
    assert Record.decode(action.applied(obj)["metadata"]["annotations"][DECISION]).body["switches"]
    assert rules.decide(target, obj, context(GRID), {}).outcome == "skipped"  # not opted in

    edited = apply(obj, [])
    edited["spec"]["clusterSelector"] = term(only("c-fr"))
    action = rules.decide(target, edited, context(table(SE=900, FR=900, PL=20)), enabled)
    assert action.outcome == "user_owned"
    assert action.fields == ("offloading.clusterSelector",)
