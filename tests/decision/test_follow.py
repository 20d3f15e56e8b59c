"""The re-evaluation step: keep, switch, stale, too soon, and fields the user took back."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from tests.decision.nodepools import (
    ADMITTED_AT,
    NP_WRITES,
    np_step,
    table,
)
from tests.decision.nodepools import admitted as pool
from webhook import kinds, testing
from webhook.decision.follow import Action, Inputs, apply, not_managed, step
from webhook.decision.hysteresis import Hysteresis
from webhook.decision.karmada.following import POLICY_FIELDS, POLICY_RULES
from webhook.decision.karpenter.nodepool_step import paused
from webhook.decision.outcome import Change, stored
from webhook.decision.record import MAX_SWITCHES, Record, switches, user_fields
from webhook.model.config import ClusterConfig, Config, HysteresisConfig
from webhook.model.intensity import Reading
from webhook.model.vocabulary import DECISION, ENABLED, REASON

T0 = ADMITTED_AT
CLUSTERS = {n: ClusterConfig(name=n, zone=z) for n, z in (("a", "FR"), ("b", "DE"), ("c", "PL"))}
CONFIG = Config(clusters=CLUSTERS, hysteresis=HysteresisConfig(margin=0.1, dwell_hours=12))
ROW = kinds.find("policy.karmada.io", "PropagationPolicy")
assert ROW is not None
NS = {ENABLED: "true"}


def ctx(at: datetime, values: Mapping[str, Reading]) -> kinds.Context:
    return kinds.Context(CONFIG, values, at)


def admitted(at: datetime, **values: float) -> dict[str, Any]:
    """A Divided policy with static carbon weights as admission stored it at ``at``."""
    policy = testing.propagation_policy(namespace="shop", strategy="weighted", created=at)
    assert ROW is not None
    decision = ROW.decide(policy, ctx(at, table(at, False, **values)))
    assert decision.record is not None
    return apply(policy, stored(policy, decision, ROW.scope).changes)


def reevaluate(
    obj: Mapping[str, Any],
    at: datetime,
    *,
    stale: bool = False,
    min_interval: float = 1800,
    namespace: Mapping[str, str] | None = NS,
    **values: float,
) -> Action:
    readings = table(at, stale, **values)
    assert ROW is not None
    row = ROW
    inputs = Inputs(
        decide=lambda o: row.decide(o, ctx(at, readings)),
        table=readings,
        clusters=CLUSTERS,
        now=at,
        hysteresis=Hysteresis(0.1, 12),
        min_interval_seconds=min_interval,
        namespace_labels=namespace,
        fields=POLICY_FIELDS,
    )
    return step(obj, inputs, POLICY_RULES)


def weights(obj: Mapping[str, Any]) -> dict[str, int]:
    entries = obj["spec"]["placement"]["replicaScheduling"]["weightPreference"]
    named = [e for e in entries["staticWeightList"] if "clusterNames" in e["targetCluster"]]
    return {e["targetCluster"]["clusterNames"][0]: e["weight"] for e in named}


def record_of(obj: Mapping[str, Any]) -> Record:
    return Record.decode(obj["metadata"]["annotations"][DECISION])


def test_switches_to_the_new_greenest_after_the_dwell_with_history() -> None:
    stored = admitted(T0, FR=100, DE=400, PL=800)
    assert max(weights(stored), key=weights(stored).__getitem__) == "a"
    later = T0 + timedelta(hours=13)
    action = reevaluate(stored, later, FR=600, DE=100, PL=800)
    assert action.outcome == "switched"
    assert action.before is not None
    assert action.after is not None
    assert action.after < action.before * 0.9
    assert "greener than the placement in force" in action.reason
    switched = action.applied(stored)
    assert max(weights(switched), key=weights(switched).__getitem__) == "b"
    # exactly what a refresh would write, plus the history
    assert ROW is not None
    refresh = ROW.decide(stored, ctx(later, table(later, FR=600, DE=100, PL=800)))
    assert [c for c in action.changes if c.path[-1] not in (DECISION, REASON)] == refresh.changes
    (entry,) = switches(record_of(switched))
    assert entry["t"] == "2026-03-02T01:00:00Z"
    assert entry["from"] == weights(stored)
    assert entry["to"] == weights(switched)
    assert entry["before"] > entry["after"]
    # stored again: nothing more to do
    again = reevaluate(switched, later + timedelta(hours=1), FR=600, DE=100, PL=800)
    assert again.outcome == "kept"
    assert again.changes == ()


def test_no_switch_within_the_dwell_or_the_margin() -> None:
    stored = admitted(T0, FR=100, DE=400, PL=800)
    soon = reevaluate(stored, T0 + timedelta(hours=2), FR=600, DE=100, PL=800)
    assert (soon.outcome, soon.changes) == ("kept", ())
    assert "in force 2.0 h of 12 h" in soon.reason
    wobble = reevaluate(stored, T0 + timedelta(hours=13), FR=104, DE=390, PL=800)
    assert (wobble.outcome, wobble.changes) == ("kept", ())
    identical = reevaluate(stored, T0 + timedelta(hours=13), FR=100, DE=400, PL=800)
    assert (identical.outcome, identical.changes) == ("kept", ())


def test_stale_or_missing_data_never_writes() -> None:
    stored = admitted(T0, FR=100, DE=400, PL=800)
    action = reevaluate(stored, T0 + timedelta(hours=13), stale=True, FR=600, DE=100, PL=800)
    assert action.outcome == "stale"
    assert action.changes == ()
    assert "a, b, c" in action.reason
    missing = reevaluate(stored, T0 + timedelta(hours=13), FR=600, DE=100)  # no PL yet
    assert (missing.outcome, missing.changes) == ("stale", ())
    assert "for c:" in missing.reason


def test_too_soon_after_the_last_write() -> None:
    stored = admitted(T0, FR=100, DE=400, PL=800)
    # created 10 minutes ago and a switch is due (dwell passed on the data time)
    created = dict(
        stored, metadata={**stored["metadata"], "creationTimestamp": "2026-03-02T00:50:00Z"}
    )
    action = reevaluate(created, T0 + timedelta(hours=13), FR=600, DE=100, PL=800)
    assert action.outcome == "too_soon"
    assert action.changes == ()
    assert "last write 600 s ago" in action.reason
    # the last recorded switch counts too
    switched = reevaluate(stored, T0 + timedelta(hours=13), min_interval=0, FR=600, DE=100, PL=800)
    back = switched.applied(stored)
    later = T0 + timedelta(hours=26)
    assert reevaluate(back, later, min_interval=86400, FR=100, DE=600, PL=800).outcome == "too_soon"
    assert reevaluate(back, later, FR=100, DE=600, PL=800).outcome == "switched"


def test_a_user_edit_of_an_owned_field_is_released_once() -> None:
    stored = admitted(T0, FR=100, DE=400, PL=800)
    edited = apply(
        stored,
        [
            Change(
                ("spec", "placement", "replicaScheduling"),
                {"replicaSchedulingType": "Duplicated"},
            )
        ],
    )
    action = reevaluate(edited, T0 + timedelta(hours=13), FR=600, DE=100, PL=800)
    assert action.outcome == "user_owned"
    assert action.fields == ("placement.replicaScheduling",)
    assert [c.path for c in action.changes] == [
        ("metadata", "annotations", DECISION),
        ("metadata", "annotations", REASON),
    ]
    written = action.applied(edited)
    assert written["spec"] == edited["spec"]
    record = record_of(written)
    assert user_fields(record) == ["placement.replicaScheduling"]
    assert "placement.replicaScheduling" not in record.own
    # from now on carbonshift leaves that field alone: nothing more to write or warn about
    again = reevaluate(written, T0 + timedelta(hours=30), FR=600, DE=100, PL=800)
    assert again.outcome == "kept"
    assert again.changes == ()


def test_history_keeps_the_last_five_switches() -> None:
    obj = admitted(T0, FR=100, DE=400, PL=800)
    at = T0
    for i in range(7):
        at += timedelta(hours=13)
        fr, de = (600.0, 100.0) if i % 2 == 0 else (100.0, 600.0)
        action = reevaluate(obj, at, FR=fr, DE=de, PL=800)
        assert action.outcome == "switched", (i, action.reason)
        obj = action.applied(obj)
    done = switches(record_of(obj))
    assert len(done) == MAX_SWITCHES
    assert done[-1]["t"] == at.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_a_refresh_keeps_the_switch_history_and_the_fields_users_took_back() -> None:
    """A refresh (admission deciding again) writes a new record but keeps the object's
    story: the re-evaluation's switches and the fields a user took back."""
    stored = admitted(T0, FR=100, DE=400, PL=800)
    switched = reevaluate(stored, T0 + timedelta(hours=13), FR=600, DE=100, PL=800)
    obj = switched.applied(stored)
    edited = apply(obj, [Change(("spec", "placement", "replicaScheduling"), {"x": 1})])
    obj = reevaluate(edited, T0 + timedelta(hours=14), FR=600, DE=100, PL=800).applied(edited)
    before = record_of(obj)
    assert len(switches(before)) == 1
    assert user_fields(before) == ["placement.replicaScheduling"]
    assert ROW is not None
    later = T0 + timedelta(hours=30)
    refresh = ROW.decide(obj, ctx(later, table(later, FR=50, DE=600, PL=800)))
    assert refresh.changes  # a new placement, with a new record
    assert refresh.record is not None
    assert switches(refresh.record) == switches(before)
    assert user_fields(refresh.record) == ["placement.replicaScheduling"]
    assert refresh.record.body["at"] != before.body["at"]


def test_only_managed_objects_opted_in_as_for_admission() -> None:
    stored = admitted(T0, FR=100, DE=400, PL=800)
    assert not_managed(stored, NS) is None
    assert "namespace" in (not_managed(stored, {}) or "")
    assert "object" in (not_managed(stored, None) or "")  # cluster-scoped: own label
    labelled = apply(stored, [Change(("metadata", "labels", ENABLED), "true")])
    assert not_managed(labelled, None) is None
    out = apply(stored, [Change(("metadata", "labels", ENABLED), "false")])
    assert "opted out" in (not_managed(out, NS) or "")
    going = apply(stored, [Change(("metadata", "deletionTimestamp"), "2026-03-01T13:00:00Z")])
    assert not_managed(going, NS) == "being deleted"
    bare = apply(stored, [Change(("metadata", "annotations"), {})])
    assert reevaluate(bare, T0, FR=1).outcome == "skipped"


# --- NodePools over time --------------------------------------------------------------


def body(obj: Mapping[str, Any]) -> dict[str, Any]:
    return Record.decode(obj["metadata"]["annotations"][DECISION]).body


def test_a_dirty_pool_admitted_paused_resumes_at_max_pause_with_its_limits_back() -> None:
    limits = {"cpu": "1000", "memory": "1000Gi"}
    obj = pool(limits=limits, max_pause="2h")
    assert obj["spec"]["limits"] == {"cpu": "0", "memory": "1000Gi"}
    assert paused(obj)
    kept = np_step(obj, T0 + timedelta(hours=1), DE=450)
    assert kept.outcome == "kept"
    assert not kept.changes
    action = np_step(obj, T0 + timedelta(hours=2), DE=460)
    assert action.outcome == "switched"
    assert action.pause == "resumed"
    assert "max-pause 2h used up" in action.reason
    assert "DE at 460" in action.reason
    resumed = action.applied(obj)
    assert resumed["spec"]["limits"] == limits
    assert not paused(resumed)
    assert body(resumed)["resumed_at"] == "2026-03-01T14:00:00Z"
    assert switches(Record.decode(resumed["metadata"]["annotations"][DECISION]))[-1]["pause"] == (
        "resumed"
    )
    # Still dirty an hour later: the pool runs at least an hour before a new pause.
    assert np_step(resumed, T0 + timedelta(hours=2, minutes=30), DE=460).outcome == "kept"


def test_a_paused_pool_without_limits_resumes_without_limits_when_clean() -> None:
    obj = pool()
    assert obj["spec"]["limits"] == {"cpu": "0"}
    action = np_step(obj, T0 + timedelta(hours=1), DE=100)
    assert action.pause == "resumed"
    assert "the grid is low now" in action.reason
    resumed = action.applied(obj)
    assert "limits" not in resumed["spec"]
    assert resumed["spec"]["weight"] == 90  # the weight follows the grid in the same write
    assert {c.path for c in action.changes} == NP_WRITES


def test_a_pool_pauses_when_a_cleaner_hour_is_forecast_and_says_when() -> None:
    obj = pool(g=200, max_pause="6h")
    assert "limits" not in obj["spec"]
    later = T0 + timedelta(hours=1)
    no_cleaner = np_step(obj, later, outlook=[450, 460, 470, 480, 490, 500, 510], DE=450)
    assert no_cleaner.outcome == "switched"
    assert no_cleaner.pause is None
    assert ("spec", "limits") not in {c.path for c in no_cleaner.changes}
    action = np_step(obj, later, outlook=[450, 400, 200, 300, 450, 450, 450], DE=450)
    assert action.outcome == "switched"
    assert action.pause == "paused"
    assert "DE is at 450 g/kWh" in action.reason
    assert "cleaner hour 15:00Z in 2 h, ~200 g/kWh forecast; max-pause 6h" in action.reason
    held = action.applied(obj)
    assert held["spec"]["limits"] == {"cpu": "0"}
    assert paused(held)
    assert body(held)["paused_at"] == "2026-03-01T13:00:00Z"


def test_stale_data_never_writes_a_pause_or_a_weight() -> None:
    obj = pool(g=200)
    action = np_step(obj, T0 + timedelta(hours=1), stale=True, DE=450)
    assert action.outcome == "stale"
    assert not action.changes
    held = pool()  # paused, max-pause 24 h not used up
    assert np_step(held, T0 + timedelta(hours=1), stale=True, DE=100).outcome == "stale"
    assert np_step(held, T0 + timedelta(hours=1), DE=100).pause == "resumed"


def test_a_pause_still_ends_at_max_pause_on_stale_data_and_keeps_the_weight() -> None:
    held = pool(max_pause="1h")
    action = np_step(held, T0 + timedelta(hours=1), stale=True, DE=100)
    assert action.pause == "resumed"
    assert "max-pause 1h used up" in action.reason
    resumed = action.applied(held)
    assert "limits" not in resumed["spec"]
    assert resumed["spec"]["weight"] == held["spec"]["weight"]


def test_min_interval_delays_a_pause_but_never_a_resume() -> None:
    obj = pool(g=200)
    soon = T0 + timedelta(minutes=10)
    assert np_step(obj, soon, min_interval=1800, DE=450).outcome == "too_soon"
    held = pool(max_pause="1m")
    assert np_step(held, soon, min_interval=1800, DE=450).pause == "resumed"


def test_limits_a_user_edits_while_paused_are_released_not_restored() -> None:
    held = pool()
    held["spec"]["limits"] = {"cpu": "64"}
    action = np_step(held, T0 + timedelta(hours=1), DE=100)
    assert action.outcome == "user_owned"
    assert action.fields == ("spec.limits",)
    assert [c.path for c in action.changes] == [
        ("metadata", "annotations", DECISION),
        ("metadata", "annotations", REASON),
    ]
    released_ = action.applied(held)
    assert user_fields(Record.decode(released_["metadata"]["annotations"][DECISION])) == [
        "spec.limits"
    ]
    again = np_step(released_, T0 + timedelta(hours=2), DE=100)
    assert again.outcome in ("kept", "switched")
    assert again.applied(released_)["spec"]["limits"] == {"cpu": "64"}


def test_nodepools_opted_out_or_never_decided_are_skipped() -> None:
    held = pool()
    held["metadata"]["labels"][ENABLED] = "false"
    assert np_step(held, T0 + timedelta(hours=30), DE=100).outcome == "skipped"
    plain = pool()
    del plain["metadata"]["annotations"][DECISION]
    assert np_step(plain, T0 + timedelta(hours=30), DE=100).outcome == "skipped"
