"""AdmissionReview handling: envelope errors, dispatch, opt-in, UPDATE, fail-open."""

from __future__ import annotations

import base64
import copy
import dataclasses
import re
from datetime import timedelta
from typing import Any

import jsonpatch
import msgspec
import orjson
import pytest

from tests.support import NOW, reading
from webhook import testing
from webhook.decision.karmada import placement
from webhook.kinds import Context
from webhook.model.config import Config
from webhook.model.intensity import Reading
from webhook.model.validation import InvalidInput
from webhook.model.vocabulary import DECISION
from webhook.serve import admission, reviews


def request(obj: dict[str, Any] | None, **options: Any) -> dict[str, Any]:
    """The ``request`` of the AdmissionReview kube-apiserver sends for ``obj``."""
    req: dict[str, Any] = testing.review(obj, **options)["request"]
    return req


def pp(labels: dict[str, str] | None = None, **annotations: str) -> dict[str, Any]:
    return testing.propagation_policy(namespace="shop", labels=labels, annotations=annotations)


@pytest.fixture
def ctx(config: Config, table: dict[str, Reading]) -> Context:
    return Context(config=config, table=table, now=NOW)


def admit(
    req: dict[str, Any], ctx: Context, memo: admission.DecisionMemo | None = None
) -> admission.Outcome:
    return admission.admit(reviews.request_of(req), ctx, memo)


def stored(req: dict[str, Any], outcome: admission.Outcome) -> dict[str, Any]:
    return jsonpatch.apply_patch(copy.deepcopy(req["object"]), outcome.patch)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "not valid JSON"),
        (b"[]", "expected object, got array"),
        (b'{"apiVersion": "admission.k8s.io/v1beta1", "request": {"uid": "x"}}', "apiVersion: "),
        (b'{"kind": "AdmissionReview"}', "missing required field request"),
        (b'{"request": {"uid": ""}}', "request.uid: expected str of length >= 1"),
        (b'{"request": {"uid": "x", "object": 3}}', "request.object: expected object"),
        (b'{"request": {"uid": "x", "kind": {"kind": 7}}}', "request.kind.kind: expected str"),
    ],
)
def test_bad_envelopes_are_rejected_naming_the_field(body: bytes, message: str) -> None:
    with pytest.raises(InvalidInput, match=re.escape(message)):
        reviews.parse(body)


def test_propagation_policy_create_is_patched(ctx: Context) -> None:
    req = request(pp())
    outcome = admit(req, ctx)
    assert outcome.result == "patched"
    obj = stored(req, outcome)
    assert "carbonshift.io/decision" in obj["metadata"]["annotations"]
    body = orjson.loads(admission.respond(outcome))
    assert body["apiVersion"] == "admission.k8s.io/v1"
    assert body["kind"] == "AdmissionReview"
    assert body["response"]["uid"] == testing.UID
    assert body["response"]["allowed"] is True
    assert body["response"]["patchType"] == "JSONPatch"
    assert orjson.loads(base64.b64decode(body["response"]["patch"])) == outcome.patch


def test_resubmitting_the_stored_object_gives_no_patch(ctx: Context) -> None:
    req = request(pp())
    again = request(stored(req, admit(req, ctx)))
    outcome = admit(again, ctx)
    assert outcome.result == "unchanged"
    assert "patch" not in orjson.loads(admission.respond(outcome))["response"]


def test_kinds_we_do_not_handle_are_allowed_untouched(ctx: Context) -> None:
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}}
    outcome = admit(request(deployment), ctx)
    assert (outcome.result, outcome.patch) == ("ignored", [])


def test_object_opt_out_and_cluster_scoped_opt_in(ctx: Context) -> None:
    out = admit(request(pp({"carbonshift.io/enabled": "false"})), ctx)
    assert out.result == "skipped"
    cpp = testing.cluster_propagation_policy()
    assert admit(request(cpp), ctx).result == "skipped"
    cpp = testing.cluster_propagation_policy(enabled=True)
    assert admit(request(cpp), ctx).result == "patched"


def test_update_recomputes_only_when_refresh_changes(ctx: Context) -> None:
    old = pp()
    new = pp(**{"carbonshift.io/max-clusters": "1"})
    out = admit(request(new, operation="UPDATE", old=old), ctx)
    assert out.result == "skipped"
    new["metadata"]["annotations"]["carbonshift.io/refresh"] = "2026-01-01"
    out = admit(request(new, operation="UPDATE", old=old), ctx)
    assert out.result == "patched"
    deleted = admit(request(old, operation="DELETE"), ctx)
    assert deleted.result == "skipped"


@pytest.mark.parametrize("strategy", ["fill", "weighted"])
def test_a_refresh_within_the_dwell_keeps_the_placement_and_its_record(
    config: Config, table: dict[str, Reading], strategy: str
) -> None:
    # The grid turned an hour after admission, inside the dwell: the placement in force
    # and the decision record stored with it stay, and the answer is a decision, not a
    # failure answered open.
    config = msgspec.structs.replace(
        config, hysteresis=msgspec.structs.replace(config.hysteresis, dwell_hours=12.0)
    )
    policy = testing.propagation_policy(namespace="shop", strategy=strategy, created=NOW)
    first = request(policy)
    kept = stored(first, admit(first, Context(config=config, table=table, now=NOW)))
    turned = {**table, "FR": reading("FR", 700.0), "PL": reading("PL", 60.0)}
    refreshed = copy.deepcopy(kept)
    refreshed["metadata"]["annotations"]["carbonshift.io/refresh"] = "now"
    later = Context(config=config, table=turned, now=NOW + timedelta(hours=1))
    req = request(refreshed, operation="UPDATE", old=kept)
    out = admit(req, later)
    assert out.result in ("patched", "unchanged"), out.reason
    after = stored(req, out) if out.patch else refreshed
    assert after["spec"]["placement"] == kept["spec"]["placement"]
    assert after["metadata"]["annotations"][DECISION] == kept["metadata"]["annotations"][DECISION]


def test_nodepool_is_labelled_when_opted_in(ctx: Context) -> None:
    req = request(testing.nodepool("np", enabled=True, requirements=[]))
    out = admit(req, ctx)
    labels = stored(req, out)["spec"]["template"]["metadata"]["labels"]
    assert labels["carbonshift.io/intensity"] == "medium"


def test_an_internal_error_fails_open_with_a_warning(
    ctx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    def explode(*_args: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr("webhook.decision.karmada.placement.decide", explode)
    out = admit(request(pp()), ctx)
    assert out.result == "failed_open"
    response = orjson.loads(admission.respond(out))["response"]
    assert response["allowed"] is True
    assert "patch" not in response
    assert response["warnings"] == ["carbonshift: internal error; admitted unchanged"]


def test_memo_answers_identical_inputs_once_and_follows_the_data(
    ctx: Context, monkeypatch: pytest.MonkeyPatch, table: dict[str, Reading]
) -> None:
    calls = []
    real = placement.decide
    monkeypatch.setattr(
        "webhook.decision.karmada.placement.decide", lambda *a: calls.append(1) or real(*a)
    )
    memo = admission.DecisionMemo(size=2)
    no_generation = admission.DecisionMemo.key(reviews.request_of(request(pp())), ctx)
    assert no_generation is None
    ctx = dataclasses.replace(ctx, generation=1)
    first = admit(request(pp()), ctx, memo)
    other = request(testing.propagation_policy("another", namespace="shop"), uid="u-2")
    second = admit(other, ctx, memo)
    assert len(calls) == 1
    assert (second.uid, second.name) == ("u-2", "another")
    assert second.patch == first.patch
    greener = dict(table) | {"PL": dataclasses.replace(table["PL"], value=5.0)}
    newer = dataclasses.replace(ctx, table=greener, generation=2)
    third = admit(request(pp()), newer, memo)
    assert len(calls) == 2
    assert third.patch != first.patch
    admit(request(pp(**{"carbonshift.io/max-clusters": "1"})), ctx, memo)
    assert len(memo) == 2


def test_memo_ignores_annotations_and_labels_a_decision_never_reads(
    ctx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []
    real = placement.decide
    monkeypatch.setattr(
        "webhook.decision.karmada.placement.decide", lambda *a: calls.append(1) or real(*a)
    )
    memo = admission.DecisionMemo()
    ctx = dataclasses.replace(ctx, generation=1)
    applied = "kubectl.kubernetes.io/last-applied-configuration"
    first = pp({"team": "a"}, **{applied: '{"metadata":{"name":"web"}}'})
    second = pp({"team": "b"}, **{applied: '{"metadata":{"name":"web-2"}}'})
    assert admit(request(first), ctx, memo).patch == admit(request(second), ctx, memo).patch
    assert len(calls) == 1
    admit(request(pp(**{"carbonshift.io/max-clusters": "1"})), ctx, memo)
    assert len(calls) == 2
    # Without any annotations the patch must add the map itself: a different answer.
    bare = pp()
    del bare["metadata"]["annotations"]
    req = request(bare)
    out = admit(req, ctx, memo)
    assert len(calls) == 3
    assert stored(req, out)["metadata"]["annotations"]["carbonshift.io/decision"]


def test_raw_reviews_hit_the_memo_without_building_the_object(ctx: Context) -> None:
    memo = admission.DecisionMemo()
    ctx = dataclasses.replace(ctx, generation=1)
    answers = []
    for i in range(3):
        applied = {"kubectl.kubernetes.io/last-applied-configuration": f"web-{i}"}
        obj = testing.propagation_policy(f"web-{i}", namespace="shop", annotations=applied)
        review = testing.review(obj, uid=f"u-{i}")
        req = review["request"]
        body = orjson.dumps(review)
        outcome = admission.review(body, ctx, memo)
        assert (outcome.uid, outcome.name, outcome.result) == (f"u-{i}", f"web-{i}", "patched")
        answer = orjson.loads(admission.respond(outcome))["response"]
        assert answer["uid"] == f"u-{i}"
        answers.append({k: v for k, v in answer.items() if k != "uid"})
        # The answer is the one the object path gives.
        assert admission.respond(admit(req, ctx)) == admission.respond(outcome)
    assert len(memo) == 1
    assert answers[0] == answers[1] == answers[2]


def test_a_raw_object_that_is_not_an_object_is_named(ctx: Context) -> None:
    ctx = dataclasses.replace(ctx, generation=1)
    body = b'{"request": {"uid": "x", "operation": "CREATE", "object": [1]}}'
    with pytest.raises(InvalidInput, match=re.escape("request.object: expected object")):
        admission.review(body, ctx, admission.DecisionMemo())


def test_delete_reviews_of_handled_kinds_are_skipped_not_unknown(ctx: Context) -> None:
    out = admit(request(None, operation="DELETE", old=pp()), ctx)
    assert (out.result, out.reason) == ("skipped", "operation DELETE is not mutated")


def test_a_rule_left_unapplied_is_recorded_on_the_object_even_without_other_changes(
    ctx: Context,
) -> None:
    obj = pp()
    obj["spec"]["placement"]["spreadConstraints"] = [{"spreadByField": "cluster", "maxGroups": 1}]
    req = request(obj)
    out = admit(req, ctx)
    assert out.result == "patched"
    assert [op["path"] for op in out.patch] == [
        "/metadata/annotations/carbonshift.io~1decision",
        "/metadata/annotations/carbonshift.io~1reason",
    ]
    record = orjson.loads(stored(req, out)["metadata"]["annotations"]["carbonshift.io/decision"])
    assert record["left"], record
    assert any("spreadConstraints" in w for w in out.warnings)
    # Submitting what was stored changes nothing more.
    assert admit(request(stored(req, out)), ctx).result == "unchanged"
