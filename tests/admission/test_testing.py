"""``webhook.testing``: the builders users' tests (and ours) make objects and reviews with.

Each built object is one carbonshift's own readers accept (admission's envelope decoder,
the fleet inventory, the kind registry), and each call returns a fresh dict."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime

import orjson
import pytest

from tests.support import NOW
from webhook import testing
from webhook.decision.fleet import entry
from webhook.kinds import Context
from webhook.model.config import Config
from webhook.model.intensity import Reading
from webhook.model.vocabulary import DECISION, ENABLED, STRATEGY, ZONE
from webhook.serve import admission, reviews


@pytest.fixture
def ctx(config: Config, table: dict[str, Reading]) -> Context:
    return Context(config=config, table=table, now=NOW)


def answer(review: dict[str, object], ctx: Context) -> bytes:
    return admission.respond(admission.review(orjson.dumps(review), ctx))


def test_a_review_is_what_kube_apiserver_sends_for_a_namespaced_kind() -> None:
    policy = testing.propagation_policy(namespace="shop")
    review = testing.review(policy)
    assert review["apiVersion"] == "admission.k8s.io/v1"
    assert review["kind"] == "AdmissionReview"
    request = review["request"]
    gvk = {"group": "policy.karmada.io", "version": "v1alpha1", "kind": "PropagationPolicy"}
    gvr = {"group": "policy.karmada.io", "version": "v1alpha1", "resource": "propagationpolicies"}
    assert (request["kind"], request["requestKind"]) == (gvk, gvk)
    assert (request["resource"], request["requestResource"]) == (gvr, gvr)
    assert (request["uid"], request["name"], request["namespace"]) == (testing.UID, "web", "shop")
    assert (request["operation"], request["dryRun"], request["oldObject"]) == (
        "CREATE",
        False,
        None,
    )
    assert request["options"] == {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}
    assert request["userInfo"]["username"] == "kubernetes-admin"
    assert request["object"] == policy
    parsed = reviews.parse(orjson.dumps(review))
    assert (parsed.uid, parsed.kind.kind, parsed.namespace) == (
        testing.UID,
        "PropagationPolicy",
        "shop",
    )


@pytest.mark.parametrize(
    ("obj", "resource"),
    [
        (testing.nodepool(enabled=True), "nodepools"),
        (testing.cluster_propagation_policy(enabled=True), "clusterpropagationpolicies"),
    ],
)
def test_cluster_scoped_kinds_carry_no_namespace(obj: dict[str, object], resource: str) -> None:
    request = testing.review(obj)["request"]
    assert "namespace" not in request
    assert request["resource"]["resource"] == resource


def test_a_kind_carbonshift_does_not_handle_gets_a_plural_and_its_own_namespace() -> None:
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}}
    request = testing.review(deployment)["request"]
    assert request["resource"] == {"group": "apps", "version": "v1", "resource": "deployments"}
    assert "namespace" not in request
    deployment["metadata"]["namespace"] = "shop"
    assert testing.review(deployment)["request"]["namespace"] == "shop"
    assert testing.review(deployment, resource="deploys")["request"]["resource"]["resource"] == (
        "deploys"
    )


def test_update_and_delete_carry_the_old_object_and_their_options() -> None:
    old = testing.propagation_policy()
    new = testing.propagation_policy(strategy="fill")
    update = testing.review(new, operation="UPDATE", old=old, uid="u-2", dry_run=True)["request"]
    assert (update["object"], update["oldObject"], update["uid"]) == (new, old, "u-2")
    assert update["options"]["kind"] == "UpdateOptions"
    assert update["dryRun"] is True
    delete = testing.review(None, operation="DELETE", old=old)["request"]
    assert (delete["object"], delete["oldObject"], delete["name"]) == (None, old, "web")
    assert delete["namespace"] == "default"
    assert delete["options"]["kind"] == "DeleteOptions"
    with pytest.raises(ValueError, match="needs an object"):
        testing.review(None)


def test_every_call_returns_a_fresh_object() -> None:
    first = testing.propagation_policy()
    first["spec"]["placement"]["replicaScheduling"]["replicaSchedulingType"] = "Duplicated"
    first["spec"]["resourceSelectors"].append({"kind": "Service"})
    assert testing.propagation_policy() == testing.propagation_policy(placement=testing.DIVIDED)
    assert testing.propagation_policy()["spec"]["resourceSelectors"] == [
        {"apiVersion": "apps/v1", "kind": "Deployment"}
    ]
    pool = testing.nodepool()
    pool["spec"]["template"]["spec"]["requirements"].clear()
    assert testing.nodepool()["spec"]["template"]["spec"]["requirements"]
    review = testing.review(first)
    review["request"]["object"]["metadata"]["name"] = "changed"
    assert first["metadata"]["name"] == "web"


def test_policy_options_land_where_karmada_and_carbonshift_read_them() -> None:
    at = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
    policy = testing.propagation_policy(
        "api",
        namespace="shop",
        labels={"team": "a"},
        annotations={"x": "y"},
        enabled=False,
        strategy="weighted",
        clusters=["member-fr", "member-de"],
        created=at,
        uid="0d6b5c4e",
    )
    meta = policy["metadata"]
    assert meta["uid"] == "0d6b5c4e"
    assert (meta["name"], meta["namespace"], meta["creationTimestamp"]) == (
        "api",
        "shop",
        "2026-03-01T10:00:00Z",
    )
    assert meta["labels"] == {"team": "a", ENABLED: "false"}
    assert meta["annotations"] == {"x": "y", STRATEGY: "weighted"}
    assert policy["spec"]["placement"] == {
        "replicaScheduling": {"replicaSchedulingType": "Divided"},
        "clusterAffinity": {"clusterNames": ["member-fr", "member-de"]},
    }
    cpp = testing.cluster_propagation_policy(enabled=True)
    assert cpp["kind"] == "ClusterPropagationPolicy"
    assert "namespace" not in cpp["metadata"]


def test_nodepool_options() -> None:
    pool = testing.nodepool(
        "batch",
        enabled=True,
        strategy="pause",
        requirements=[],
        node_class={"group": "karpenter.k8s.gcp", "kind": "GCENodeClass", "name": "n"},
        limits={"cpu": "100"},
        weight=10,
    )
    assert pool["apiVersion"] == "karpenter.sh/v1"
    assert pool["metadata"]["labels"] == {ENABLED: "true"}
    assert pool["metadata"]["annotations"] == {STRATEGY: "pause"}
    assert pool["spec"] == {
        "template": {
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.gcp", "kind": "GCENodeClass", "name": "n"},
                "requirements": [],
            }
        },
        "limits": {"cpu": "100"},
        "weight": 10,
    }


def test_admission_patches_a_policy_and_stored_applies_its_answer(ctx: Context) -> None:
    policy = testing.propagation_policy(namespace="shop")
    body = answer(testing.review(policy), ctx)
    patch = testing.patch_of(body)
    assert patch
    assert testing.patch_of(body.decode()) == testing.patch_of(orjson.loads(body)) == patch
    kept = testing.stored(policy, body)
    assert DECISION in kept["metadata"]["annotations"]
    assert DECISION not in policy["metadata"]["annotations"]
    assert testing.patch_of(answer(testing.review(kept), ctx)) == []
    assert testing.stored(kept, answer(testing.review(kept), ctx)) == kept


def test_cluster_scoped_objects_are_managed_only_when_enabled(ctx: Context) -> None:
    for obj in (testing.nodepool(), testing.cluster_propagation_policy()):
        assert testing.patch_of(answer(testing.review(obj), ctx)) == []
    pool = testing.nodepool(enabled=True)
    template = testing.stored(pool, answer(testing.review(pool), ctx))["spec"]["template"]
    assert template["metadata"]["labels"]["carbonshift.io/intensity"] == "medium"  # DE, 380 g


def test_a_cluster_is_read_by_the_fleet_inventory() -> None:
    labelled = entry(testing.cluster("member-a", zone="FR", labels={"tier": "gold"}), Config())
    assert (labelled.grid_zone, labelled.zone_source) == ("FR", "label")
    assert labelled.labels == {"tier": "gold", ZONE: "FR"}
    regional = entry(
        testing.cluster(
            "member-b", provider="aws", region="eu-north-1", zones=["eu-north-1a"], ready=True
        ),
        Config(),
    )
    assert (regional.grid_zone, regional.zone_source, regional.ready) == (
        "SE-SE3",
        "region-table",
        True,
    )
    assert (regional.provider, regional.region, regional.zones) == (
        "aws",
        "eu-north-1",
        ("eu-north-1a",),
    )
    assert entry(testing.cluster("member-c", zone="PL", ready=False), Config()).ready is False


def test_a_cluster_with_a_resource_summary() -> None:
    summary = testing.resource_summary(8, used=6, allocating=0.5)
    assert summary == {
        "allocatable": {"cpu": "8", "memory": "256Gi", "pods": "1000"},
        "allocated": {"cpu": "6", "pods": "6"},
        "allocating": {"cpu": "0.5"},
    }
    obj = testing.cluster("green", summary=summary)
    assert obj["status"] == {"resourceSummary": summary}
    assert obj["spec"] == {"syncMode": "Push"}
    assert "status" not in testing.cluster("green")


def test_the_module_needs_no_test_framework() -> None:
    code = (
        "import sys, webhook.testing\n"
        "roots = {'pytest', '_pytest', 'tests'}\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in roots)\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
