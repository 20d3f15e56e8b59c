"""The leader tells what the API server dropped of carbonshift's write from a user's edit:
an ordered fill whose ``overflowAffinities`` an older Karmada pruned is decided again, at
once, as failover groups, and stays carbonshift's."""

from __future__ import annotations

import copy
from datetime import datetime, timedelta
from typing import Any

import msgspec

from tests.decision.nodepools import ADMITTED_AT, table
from webhook import kinds, testing
from webhook.decision.follow import Action, Inputs, apply, step
from webhook.decision.hysteresis import Hysteresis
from webhook.decision.karmada.following import POLICY_FIELDS, POLICY_RULES
from webhook.decision.karmada.pruning import AFFINITIES
from webhook.decision.karmada.view import fill_of
from webhook.decision.outcome import stored
from webhook.decision.record import Record, user_fields
from webhook.model.config import ClusterConfig, Config, HysteresisConfig, KarmadaConfig
from webhook.model.vocabulary import DECISION, ENABLED

T0 = ADMITTED_AT
CLUSTERS = {n: ClusterConfig(name=n, zone=z) for n, z in (("a", "FR"), ("b", "DE"), ("c", "PL"))}
CONFIG = Config(clusters=CLUSTERS, hysteresis=HysteresisConfig(margin=0.1, dwell_hours=12))
V1_18 = msgspec.structs.replace(CONFIG, karmada=KarmadaConfig("1.18"))
ROW = kinds.find("policy.karmada.io", "PropagationPolicy")
assert ROW is not None
VALUES = {"FR": 100.0, "DE": 400.0, "PL": 800.0}


def admitted(config: Config = V1_18) -> dict[str, Any]:
    """A plain Divided policy as admission stored it on an API keeping overflow tiers."""
    assert ROW is not None
    policy = testing.propagation_policy(namespace="shop", created=T0)
    decision = ROW.decide(policy, kinds.Context(config, table(T0, **VALUES), T0))
    return apply(policy, stored(policy, decision, ROW.scope).changes)


def pruned(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    for term in out["spec"]["placement"]["clusterAffinities"]:
        term.pop("overflowAffinities", None)
    return out


def reevaluate(obj: dict[str, Any], at: datetime, config: Config = CONFIG) -> Action:
    assert ROW is not None
    row, readings = ROW, table(at, **VALUES)
    inputs = Inputs(
        decide=lambda o: row.decide(o, kinds.Context(config, readings, at)),
        table=readings,
        clusters=CLUSTERS,
        now=at,
        hysteresis=Hysteresis(0.1, 12),
        min_interval_seconds=1800,
        namespace_labels={ENABLED: "true"},
        fields=POLICY_FIELDS,
    )
    return step(obj, inputs, POLICY_RULES)


def record_of(obj: dict[str, Any]) -> Record:
    return Record.decode(obj["metadata"]["annotations"][DECISION])


def test_a_pruned_fill_is_decided_again_at_once_as_groups() -> None:
    written = admitted()
    assert fill_of(written["spec"]["placement"])[1] == "overflow"
    cut = pruned(written)
    action = reevaluate(cut, T0 + timedelta(minutes=5))  # within min_interval_seconds
    assert action.outcome == "dropped"
    assert action.dropped == {AFFINITIES: "overflowAffinities"}
    assert "dropped the overflowAffinities of clusterAffinities" in action.reason
    fixed = action.applied(cut)
    tiers, shape = fill_of(fixed["spec"]["placement"])
    assert (tiers, shape) == ([["a"], ["b"], ["c"]], "groups")
    record = record_of(fixed)
    assert user_fields(record) == []  # never released
    assert record.owns(AFFINITIES, fixed["spec"]["placement"]["clusterAffinities"])
    assert (
        record.body["karmada"] == "the API server dropped the overflowAffinities carbonshift wrote"
    )
    # stored as written: nothing more to do, even on an API the config says keeps overflow
    again = reevaluate(fixed, T0 + timedelta(hours=1), V1_18)
    assert again.outcome == "kept", again.reason


def test_a_one_tier_fill_has_nothing_to_prune() -> None:
    """One tier only: the one term both shapes write."""
    assert ROW is not None
    policy = testing.propagation_policy(namespace="shop", created=T0, clusters=["a", "b"])
    even = {"FR": 100.0, "DE": 100.0}
    decision = ROW.decide(policy, kinds.Context(V1_18, table(T0, **even), T0))
    written = apply(policy, stored(policy, decision, ROW.scope).changes)
    terms = written["spec"]["placement"]["clusterAffinities"]
    assert "overflowAffinities" not in terms[0]  # one tier: nothing to prune
    assert reevaluate(written, T0 + timedelta(hours=1)).outcome != "dropped"


def test_a_users_edit_is_still_released() -> None:
    edited = pruned(admitted())
    edited["spec"]["placement"]["clusterAffinities"][0]["clusterNames"] = ["b"]
    action = reevaluate(edited, T0 + timedelta(hours=1))
    assert action.outcome == "user_owned"
    assert action.dropped == {}
