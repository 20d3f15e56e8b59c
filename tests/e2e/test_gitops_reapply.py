"""A user's own file applied again, as people and GitOps appliers do, on the sandbox: the
real kube-apiserver with carbonshift's webhook and Karmada's validating webhook registered.

Each applier sends its own requests: ``kubectl apply`` (client-side, the 3-way merge
against ``last-applied-configuration``; Argo CD's default sync), and server-side apply with
Flux's field manager (``kustomize-controller``, ``--force-conflicts``) and Argo CD's
(``argocd-controller``). For each handled kind and each placement shape carbonshift
writes, the unchanged file applied again is accepted and stores nothing new (the same
resourceVersion), ``kubectl diff`` of it (a server-side dry run, carbonshift's webhook
included) shows no difference, an edit of an unrelated field goes through with the
placement kept, and the user's own change of the placement is decided again. A policy the
leader moved later keeps the leader's placement through the applier's next sync.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e_support import (
    DECISION,
    ENABLED,
    PASSES,
    WEIGHTED,
    Kube,
    carbon_order,
    cluster_propagation_policy,
    more_passes,
    nodepool,
    propagation_policy,
    unique,
)
from test_fleet_labels import eventually, holder
from test_reevaluate_policies import Grid, follower, greenest

from devtools.sandbox import Sandbox
from webhook.decision.record import Record

MEMBERS = ["member-se", "member-fr", "member-pl"]
SERVER_SIDE = ("--server-side", "--force-conflicts")
APPLIERS: Mapping[str, tuple[str, ...]] = {
    "kubectl-client-side": (),
    "flux-server-side": (*SERVER_SIDE, "--field-manager=kustomize-controller"),
    "argocd-server-side": (*SERVER_SIDE, "--field-manager=argocd-controller"),
}


def _policy(namespace: str, annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    placement = {
        "clusterAffinity": {"clusterNames": list(MEMBERS)},
        "replicaScheduling": {"replicaSchedulingType": "Divided"},
    }
    return propagation_policy(
        unique("web"), namespace, placement=placement, annotations=annotations
    )


def _cluster_policy(_: str) -> dict[str, Any]:
    obj = cluster_propagation_policy(unique("cpp"), labels={ENABLED: "true"})
    obj["spec"]["placement"]["clusterAffinity"] = {"clusterNames": list(MEMBERS)}
    return obj


def _pool(_: str) -> dict[str, Any]:
    pool = nodepool(unique("pool"), "weight")
    pool["metadata"]["annotations"]["carbonshift.io/override"] = "true"
    pool["spec"]["weight"] = 10  # the user's; carbonshift's weight replaces it
    return pool


SHAPES = {
    "policy-ordered-fill": _policy,
    "policy-carbon-weights": lambda ns: _policy(ns, WEIGHTED),
    "policy-green-first-terms": lambda ns: _policy(
        ns, {**WEIGHTED, "carbonshift.io/max-clusters": "1"}
    ),
    "clusterpropagationpolicy-ordered-fill": _cluster_policy,
    "nodepool-weight": _pool,
}
RESOURCES = {
    "PropagationPolicy": "propagationpolicies.policy.karmada.io",
    "ClusterPropagationPolicy": "clusterpropagationpolicies.policy.karmada.io",
    "NodePool": "nodepools.karpenter.sh",
}


def _apply(kube: Kube, obj: Mapping[str, Any], applier: str) -> None:
    result = kube.run("apply", *APPLIERS[applier], "-f", "-", stdin=yaml.safe_dump(dict(obj)))
    assert result.returncode == 0, f"{applier} apply refused: {result.stderr.strip()}"


def _diff(kube: Kube, obj: Mapping[str, Any], applier: str) -> str:
    """``kubectl diff`` of the file: empty when nothing would change (exit 0)."""
    result = kube.run("diff", *APPLIERS[applier], "-f", "-", stdin=yaml.safe_dump(dict(obj)))
    assert result.returncode in (0, 1), f"kubectl diff failed: {result.stderr.strip()}"
    return result.stdout


def _stored(kube: Kube, obj: Mapping[str, Any], *, managed_fields: bool = False) -> dict[str, Any]:
    meta = obj["metadata"]
    where = ["-n", meta["namespace"]] if meta.get("namespace") else []
    shown = ["--show-managed-fields"] if managed_fields else []
    found: dict[str, Any] = json.loads(
        kube.ok("get", RESOURCES[obj["kind"]], meta["name"], *where, *shown, "-o", "json")
    )
    return found


def _managed(obj: Mapping[str, Any]) -> Record:
    record = Record.decode(obj["metadata"].get("annotations", {}).get(DECISION))
    assert record.own, f"carbonshift manages no field of {obj['metadata']['name']}: {obj}"
    return record


def _changed(before: Any, after: Any, at: str = "", ignore: tuple[str, ...] = ()) -> list[str]:
    """Where ``after`` differs from ``before`` (the resourceVersion and the keys named in
    ``ignore`` left out), each path with both values."""
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        out = []
        for key in sorted(set(before) | set(after)):
            if key not in ("resourceVersion", *ignore):
                out += _changed(before.get(key), after.get(key), f"{at}.{key}", ignore)
        return out
    return [] if before == after else [f"{at}: {before!r} -> {after!r}"]


def _spec(obj: Mapping[str, Any]) -> Any:
    return obj["spec"]


@pytest.fixture
def namespace(kube: Kube) -> Iterator[str]:
    """An opted-in namespace, deleted afterwards with what the test applied in it."""
    name = kube.namespace(enabled=True)
    try:
        yield name
    finally:
        kube.run("delete", "namespace", name, "--wait=false")


def _delete_later(kube: Kube, obj: Mapping[str, Any]) -> None:
    """Cluster-scoped objects outlive the test's namespace: delete them at once."""
    if not obj["metadata"].get("namespace"):
        kube.run("delete", RESOURCES[obj["kind"]], obj["metadata"]["name"], "--wait=false")


@pytest.mark.parametrize("applier", list(APPLIERS))
@pytest.mark.parametrize("shape", list(SHAPES))
def test_the_unchanged_file_applies_again_as_a_no_op(
    kube: Kube, namespace: str, shape: str, applier: str
) -> None:
    file = SHAPES[shape](namespace)
    try:
        _reapplied(kube, file, applier)
    finally:
        _delete_later(kube, file)


def _reapplied(kube: Kube, file: dict[str, Any], applier: str) -> None:
    _apply(kube, file, applier)
    first = _stored(kube, file)
    _managed(first)
    assert _diff(kube, file, applier) == "", "kubectl diff of the unchanged file"
    for _ in range(2):  # the next sync, and the one after
        _apply(kube, file, applier)
        again = _stored(kube, file)
        assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"], (
            f"re-applying stored a new version: {_spec(again)} was {_spec(first)}"
        )
    assert _diff(kube, file, applier) == ""

    edited = copy.deepcopy(file)
    edited["metadata"].setdefault("labels", {})["team"] = "shop"
    _apply(kube, edited, applier)
    labelled = _stored(kube, file)
    assert labelled["metadata"]["labels"]["team"] == "shop"
    assert _spec(labelled) == _spec(first), "an unrelated edit changed what carbonshift wrote"
    assert _managed(labelled) == _managed(first)


@pytest.mark.parametrize("applier", list(APPLIERS))
def test_the_users_own_placement_change_is_decided_again(
    kube: Kube, namespace: str, applier: str
) -> None:
    file = _policy(namespace)
    _apply(kube, file, applier)
    assert carbon_order(_stored(kube, file)) == MEMBERS
    narrowed = copy.deepcopy(file)
    narrowed["spec"]["placement"]["clusterAffinity"]["clusterNames"] = ["member-fr", "member-pl"]
    _apply(kube, narrowed, applier)
    stored = _stored(kube, file)
    assert carbon_order(stored) == ["member-fr", "member-pl"]
    assert "clusterAffinity" not in stored["spec"]["placement"]
    assert _managed(stored).orig["placement.clusterAffinity"] == {
        "clusterNames": ["member-fr", "member-pl"]
    }
    assert _diff(kube, narrowed, applier) == ""


@pytest.mark.parametrize("applier", ["kubectl-client-side", "flux-server-side"])
def test_what_the_leader_moved_survives_the_next_sync(
    sandbox: Sandbox, kube: Kube, namespace: str, tmp_path: Path, applier: str
) -> None:
    file = _policy(namespace)
    _apply(kube, file, applier)
    assert greenest(_stored(kube, file)) == "member-se"
    with Grid() as grid, follower(sandbox, tmp_path, grid) as replica:
        eventually(lambda: holder(kube, replica.name), 20.0, "leadership")
        grid.values.update({"SE-SE3": 900.0, "FR": 40.0})  # the grid turns
        moved = eventually(
            lambda: (p := _stored(kube, file)) and greenest(p) == "member-fr" and p,
            30.0,
            "the leader's move to member-fr",
        )
        more_passes(lambda: replica.metric(PASSES), 2)  # the leader settled
        moved = _stored(kube, file, managed_fields=True)
        _apply(kube, file, applier)  # the applier's next sync
        synced = _stored(kube, file, managed_fields=True)
        # The spec is the leader's; the API server may record the applier's fields anew
        # (metadata.managedFields), the one thing in the object carbonshift does not decide.
        assert synced["metadata"]["generation"] == moved["metadata"]["generation"]
        assert _changed(moved, synced, ignore=("managedFields",)) == []
        print("the first sync after the move:", _changed(moved, synced) or "no write")
        _apply(kube, file, applier)  # the sync after that
        again = _stored(kube, file)
        assert again["metadata"]["resourceVersion"] == synced["metadata"]["resourceVersion"], (
            f"the second sync stored a new version: {_changed(synced, again)}"
        )
        assert greenest(synced) == "member-fr"
        assert _diff(kube, file, applier) == ""
