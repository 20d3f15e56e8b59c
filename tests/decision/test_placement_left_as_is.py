"""A policy Karmada duplicates (``Duplicated``, or no ``replicaScheduling``) that carbonshift
writes nothing into says why: one warning line saying what to do, and the same reason as
the decision's ``skipped`` (admission answers ``skipped`` with it)."""

from __future__ import annotations

from typing import Any

from tests.decision.placements import mutate, policy
from tests.support import NOW
from webhook import testing
from webhook.decision.karmada.placement import (
    DUPLICATED_NOTE,
    UNSCHEDULED_NOTE,
    PolicyInputs,
    decide,
)
from webhook.kinds import Context
from webhook.model.config import Config
from webhook.model.intensity import Reading
from webhook.serve import admission, reviews

DUPLICATED = {"replicaScheduling": {"replicaSchedulingType": "Duplicated"}}
NAMED = {"clusterAffinity": {"clusterNames": ["member-fr", "member-de", "member-pl"]}}
DUPLICATED_WHY = (
    "placement left as is: Duplicated gives each cluster all replicas;"
    " set replicaSchedulingType: Divided"
)
UNSCHEDULED_WHY = (
    "placement left as is: no replicaScheduling means Duplicated;"
    " set replicaSchedulingType: Divided"
)


def test_a_duplicated_policy_says_why_it_is_left_as_is(
    config: Config, table: dict[str, Reading]
) -> None:
    decision = decide(policy(DUPLICATED | NAMED), PolicyInputs(config.clusters, table))
    assert decision.changes == []
    assert decision.skipped == DUPLICATED_WHY == f"placement left as is: {DUPLICATED_NOTE}"
    assert f"carbonshift: {DUPLICATED_WHY}" in decision.warnings


def test_a_policy_without_replica_scheduling_says_why_it_is_left_as_is(
    config: Config, table: dict[str, Reading]
) -> None:
    for placement in (NAMED, None):
        decision = decide(policy(placement), PolicyInputs(config.clusters, table))
        assert decision.changes == []
        assert decision.skipped == UNSCHEDULED_WHY == f"placement left as is: {UNSCHEDULED_NOTE}"
        assert decision.warnings == [f"carbonshift: {UNSCHEDULED_WHY}"]


def test_the_reasons_are_one_admission_warning_line_each() -> None:
    for why in (DUPLICATED_WHY, UNSCHEDULED_WHY):
        line = f"carbonshift: {why}"
        assert len(line) < 120
        assert "\n" not in line


def test_a_duplicated_policy_carbonshift_writes_into_needs_no_reason(
    config: Config, table: dict[str, Reading]
) -> None:
    inputs = PolicyInputs(config.clusters, table)
    # max-intensity leaves the dirtiest cluster out: Karmada duplicates to fewer clusters.
    obj = policy(DUPLICATED | NAMED, **{"carbonshift.io/max-intensity": "500"})
    decision = decide(obj, inputs)
    assert decision.changes
    assert decision.skipped is None
    assert not any("left as is" in w for w in decision.warnings)
    # Asked for a division it cannot write: the rule left alone carries the reason.
    obj = policy(DUPLICATED | NAMED, **{"carbonshift.io/strategy": "fill"})
    decision = decide(obj, inputs)
    assert decision.skipped is None
    assert decision.warnings == [f"carbonshift: ordered fill not applied: {DUPLICATED_NOTE}"]
    assert decision.record is not None
    assert decision.record.body["left"] == [{"rule": "ordered fill", "reason": DUPLICATED_NOTE}]
    # Divided: written as before.
    stored, _ = mutate(policy(NAMED | {"replicaScheduling": {}}), inputs)
    assert "clusterAffinities" in stored["spec"]["placement"]


def test_admission_answers_skipped_with_the_reason(
    config: Config, table: dict[str, Reading]
) -> None:
    obj: dict[str, Any] = testing.propagation_policy(namespace="shop", placement=DUPLICATED | NAMED)
    request = reviews.request_of(testing.review(obj)["request"])
    outcome = admission.admit(request, Context(config=config, table=table, now=NOW))
    assert (outcome.result, outcome.reason) == ("skipped", DUPLICATED_WHY)
    assert outcome.warnings == (f"carbonshift: {DUPLICATED_WHY}",)
    assert outcome.patch == []
