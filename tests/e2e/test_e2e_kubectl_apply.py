"""`kubectl apply` against a real kube-apiserver with carbonshift and karmada-webhook registered."""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e_support import (
    DECISION,
    DEMO,
    ENABLED,
    Kube,
    carbon_order,
    carbonshift_marks,
    cluster_propagation_policy,
    eventually,
    nodepool,
    propagation_policy,
    unique,
    weights,
)

from devtools.sandbox import LOOPBACK, Sandbox

PP_PERMANENT_ID = "propagationpolicy.karmada.io/permanent-id"
CPP_PERMANENT_ID = "clusterpropagationpolicy.karmada.io/permanent-id"
WEBHOOK_TIMEOUT_SECONDS = 3


def assert_carbon_placed(policy: dict[str, Any]) -> None:
    """The ordered fill over the demo clusters, greenest first, and a decision."""
    placement = policy["spec"]["placement"]
    assert placement["replicaScheduling"] == {
        "replicaSchedulingType": "Divided",
        "replicaDivisionPreference": "Weighted",
        "weightPreference": {"dynamicWeight": "AvailableReplicas"},
    }
    assert carbon_order(policy) == list(DEMO)
    assert weights(policy) == {}
    # The policy selects any cluster: clusters that join later are the last tier.
    (term,) = placement["clusterAffinities"]
    rest = term["overflowAffinities"][-1]
    assert rest["affinityName"] == "carbonshift-others"
    assert sorted(rest["exclude"]) == sorted(DEMO)
    decision = json.loads(carbonshift_marks(policy)[DECISION])
    assert decision, "the decision annotation is empty"


# 1 ---------------------------------------------------------------------------------------


def test_policy_in_labelled_namespace_is_stored_with_the_ordered_fill(kube: Kube) -> None:
    namespace = kube.namespace(enabled=True)
    kube.apply(propagation_policy("web", namespace))
    stored = kube.get("propagationpolicy", "web", namespace)
    assert_carbon_placed(stored)


# 2 ---------------------------------------------------------------------------------------

PINNED = {
    "clusterAffinity": {"clusterNames": ["member-pl"]},
    "replicaScheduling": {
        "replicaSchedulingType": "Divided",
        "replicaDivisionPreference": "Aggregated",
    },
}


@pytest.mark.parametrize(
    ("namespace_enabled", "object_labels"),
    [(False, {}), (True, {ENABLED: "false"})],
    ids=["unlabelled-namespace", "object-opt-out"],
)
def test_policy_not_opted_in_is_stored_as_applied(
    kube: Kube, namespace_enabled: bool, object_labels: dict[str, str]
) -> None:
    namespace = kube.namespace(enabled=namespace_enabled)
    applied = propagation_policy("web", namespace, labels=object_labels, placement=PINNED)
    kube.apply(applied)
    stored = kube.get("propagationpolicy", "web", namespace)
    assert carbonshift_marks(stored) == {}
    assert stored["spec"]["placement"]["clusterAffinity"] == PINNED["clusterAffinity"]
    scheduling = stored["spec"]["placement"]["replicaScheduling"]
    assert scheduling == PINNED["replicaScheduling"]
    assert stored["spec"]["resourceSelectors"][0]["name"] == "web"
    labels = stored["metadata"].get("labels") or {}
    assert {k: v for k, v in labels.items() if k.startswith("carbonshift.io/")} == object_labels


# 3 ---------------------------------------------------------------------------------------


def test_cluster_propagation_policy_opts_in_by_object_label(kube: Kube) -> None:
    opted_in, plain = unique("cpp-in"), unique("cpp-plain")
    kube.apply(cluster_propagation_policy(opted_in, labels={ENABLED: "true"}))
    kube.apply(cluster_propagation_policy(plain, labels={}))
    assert_carbon_placed(kube.get("clusterpropagationpolicy", opted_in))
    untouched = kube.get("clusterpropagationpolicy", plain)
    assert carbonshift_marks(untouched) == {}
    assert weights(untouched) == {}


def _allowed(pool: dict[str, Any], key: str) -> set[str] | None:
    """The values the NodePool's ``In`` requirements on ``key`` allow together (None: any)."""
    allowed: set[str] | None = None
    for requirement in pool["spec"]["template"]["spec"]["requirements"]:
        if requirement["key"] == key and requirement["operator"] == "In":
            values = set(requirement["values"])
            allowed = values if allowed is None else allowed & values
    return allowed


@pytest.mark.parametrize("strategy", ["efficiency", "zones", "weight", "pause"])
def test_nodepool_opts_in_and_passes_karpenter_validation(kube: Kube, strategy: str) -> None:
    name = unique(f"pool-{strategy}")
    # kubectl apply fails when the stored object would break the CRD schema or its CEL rules.
    kube.apply(nodepool(name, strategy))
    stored = kube.get("nodepool.karpenter.sh", name)
    assert DECISION in carbonshift_marks(stored)
    template_labels = stored["spec"]["template"].get("metadata", {}).get("labels", {})
    # Labelled from the grids of the pool's own zones as narrowed: strategy zones keeps the
    # greenest, eu-north-1a (SE, "low"); the others span SE, FR and PL and take the
    # dirtiest (PL, "high"), never the sandbox's global zone.
    want = "low" if strategy == "zones" else "high"
    assert template_labels.get("carbonshift.io/intensity") == want
    if strategy == "efficiency":
        arch = _allowed(stored, "kubernetes.io/arch")
        assert arch is not None
        assert "arm64" in arch
    elif strategy == "zones":
        zones = _allowed(stored, "topology.kubernetes.io/zone")
        assert zones is not None
        assert "eu-north-1a" in zones
        assert zones < {"eu-north-1a", "eu-west-3a", "europe-central2-a"}
    elif strategy == "weight":
        assert 1 <= stored["spec"]["weight"] <= 100
    else:
        assert stored["spec"]["limits"]["cpu"] == "0"


# 4 ---------------------------------------------------------------------------------------


APPLY_MODES = {"client-side": (), "server-side": ("--server-side", "--field-manager=e2e")}


@pytest.mark.parametrize("mode", list(APPLY_MODES))
def test_karmada_webhook_and_carbonshift_both_mutate_and_reapply_is_a_no_op(
    kube: Kube, mode: str
) -> None:
    namespace = kube.namespace(enabled=True)
    manifest = propagation_policy("web", namespace)
    kube.apply(manifest, *APPLY_MODES[mode])
    stored = kube.get("propagationpolicy", "web", namespace)
    assert_carbon_placed(stored)
    # karmada-webhook: permanent id, finalizer, namespace filled into the selectors.
    assert stored["metadata"]["labels"].get(PP_PERMANENT_ID)
    assert "karmada.io/propagation-policy-controller" in stored["metadata"]["finalizers"]
    assert stored["spec"]["resourceSelectors"][0]["namespace"] == namespace

    # The same manifest again (server-side, this goes through admission): nothing changes.
    kube.apply(manifest, *APPLY_MODES[mode])
    again = kube.get("propagationpolicy", "web", namespace)
    assert again["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    assert again["metadata"]["generation"] == stored["metadata"]["generation"]

    # karmada's validating webhook is enforced: the permanent id cannot be removed.
    result = kube.run("label", "propagationpolicy", "web", "-n", namespace, f"{PP_PERMANENT_ID}-")
    assert result.returncode != 0
    assert "permanent-id" in result.stderr


def test_cluster_policy_gets_karmada_permanent_id_too(kube: Kube) -> None:
    name = unique("cpp-karmada")
    manifest = cluster_propagation_policy(name, labels={ENABLED: "true"})
    kube.apply(manifest, *APPLY_MODES["server-side"])
    stored = kube.get("clusterpropagationpolicy", name)
    assert stored["metadata"]["labels"].get(CPP_PERMANENT_ID)
    assert_carbon_placed(stored)
    kube.apply(manifest, *APPLY_MODES["server-side"])
    again = kube.get("clusterpropagationpolicy", name)
    assert again["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]


# 5 ---------------------------------------------------------------------------------------


def test_server_dry_run_returns_the_mutated_object_and_persists_nothing(kube: Kube) -> None:
    namespace = kube.namespace(enabled=True)
    answered = kube.apply_json(propagation_policy("web", namespace), "--dry-run=server")
    assert_carbon_placed(answered)
    missing = kube.run("get", "propagationpolicy", "web", "-n", namespace)
    assert missing.returncode != 0
    assert "NotFound" in missing.stderr


# 6 ---------------------------------------------------------------------------------------


def test_carbonshift_down_admits_unmutated_within_the_timeout(sandbox: Sandbox, kube: Kube) -> None:
    namespace = kube.namespace(enabled=True)
    sandbox.stop("carbonshift")
    try:
        started = time.monotonic()
        kube.apply(propagation_policy("web", namespace))
        elapsed = time.monotonic() - started
    finally:
        sandbox.start("carbonshift")
    assert elapsed < WEBHOOK_TIMEOUT_SECONDS + 2, f"apply took {elapsed:.1f}s"
    stored = kube.get("propagationpolicy", "web", namespace)
    assert carbonshift_marks(stored) == {}
    assert weights(stored) == {}
    # karmada-webhook still ran.
    assert stored["metadata"]["labels"].get(PP_PERMANENT_ID)


# 7 ---------------------------------------------------------------------------------------


def _served_certificate(port: int) -> bytes:
    pem = ssl.get_server_certificate((LOOPBACK, port), timeout=2)
    return ssl.PEM_cert_to_DER_cert(pem)


def _wait_served(port: int, expected_pem: bytes, timeout: float = 15.0) -> None:
    expected = ssl.PEM_cert_to_DER_cert(expected_pem.decode())
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _served_certificate(port) == expected:
            return
        time.sleep(0.2)
    raise AssertionError("carbonshift did not pick up the rotated certificate")


def test_certificate_rotation_under_load_loses_no_admission(sandbox: Sandbox, kube: Kube) -> None:
    namespace = kube.namespace(enabled=True)
    results: list[bool] = []
    errors: list[str] = []
    stop = threading.Event()

    def keep_applying() -> None:
        index = 0
        while not stop.is_set():
            index += 1
            policy = propagation_policy(f"web-{index}", namespace)
            result = kube.run("create", "--dry-run=server", "-o", "json", "-f", "-",
                              stdin=yaml.safe_dump(policy))  # fmt: skip
            if result.returncode != 0:
                errors.append(result.stderr)
                continue
            results.append(DECISION in carbonshift_marks(json.loads(result.stdout)))

    worker = threading.Thread(target=keep_applying, daemon=True)
    worker.start()
    try:
        port = sandbox.ports["carbonshift"]
        for _ in range(2):
            time.sleep(1.0)
            pair = sandbox.rotate_carbonshift_certificate()
            _wait_served(port, pair.cert_pem)
        # Admissions after the last rotation too, and enough of them: counted, not timed
        # (a busy machine applies fewer in a second).
        rotated = len(results) + len(errors)
        wanted = max(5, rotated + 2)
        eventually(
            lambda: len(results) + len(errors) >= wanted or None,
            f"{wanted} admissions ({rotated} by the last rotation)",
            timeout=60.0,
        )
    finally:
        stop.set()
        worker.join(timeout=30)
    assert not errors, errors[:3]
    assert len(results) >= 5, f"only {len(results)} admissions during the rotation"
    assert all(results), f"{results.count(False)} of {len(results)} admissions not mutated"


# manifests --------------------------------------------------------------------------------

SKIPPED_KINDS = {"Issuer", "Certificate"}  # cert-manager CRDs are not installed


def _render(sandbox: Sandbox, overlay: Path) -> list[dict[str, Any]]:
    out = sandbox.kubectl("kustomize", str(overlay)).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


@pytest.mark.parametrize("overlay", ["cert-manager", "self-managed"])
def test_manifests_render_and_pass_server_dry_run(
    sandbox: Sandbox, kube: Kube, tmp_path: Path, overlay: str
) -> None:
    manifests = tmp_path / "manifests"
    shutil.copytree(sandbox.layout.root / "manifests", manifests)
    if overlay == "self-managed":
        certs = manifests / "overlays" / "self-managed" / "certs"
        subprocess.run(
            [*sandbox.carbonshift_command, "certs", "--service", "carbonshift",
             "--namespace", "carbonshift-system", "--out", str(certs)],
            check=True, capture_output=True,
        )  # fmt: skip
    documents = _render(sandbox, manifests / "overlays" / overlay)
    kinds = {doc["kind"] for doc in documents}
    assert {"Deployment", "Service", "PodDisruptionBudget", "MutatingWebhookConfiguration",
            "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding",
            "ConfigMap", "Namespace"} <= kinds  # fmt: skip
    webhook = next(d for d in documents if d["kind"] == "MutatingWebhookConfiguration")
    if overlay == "self-managed":
        assert all(h["clientConfig"].get("caBundle") for h in webhook["webhooks"])
        assert "Secret" in kinds
    else:
        assert "cert-manager.io/inject-ca-from" in webhook["metadata"]["annotations"]
    # Namespaced objects need their namespace to exist for a dry run.
    namespace = next(d for d in documents if d["kind"] == "Namespace")
    kube.apply(namespace)
    rest = [d for d in documents if d["kind"] not in SKIPPED_KINDS | {"Namespace"}]
    stream = yaml.safe_dump_all(rest)
    kube.ok("apply", "--dry-run=server", "-f", "-", stdin=stream)
    assert kube.run("get", "deployment", "carbonshift", "-n", "carbonshift-system").returncode
