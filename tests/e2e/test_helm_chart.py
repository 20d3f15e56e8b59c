"""The Helm chart (charts/carbonshift) against the sandbox's real API servers.

- karmada target: the karmada-apiserver half, installed with `helm install` into the
  sandbox's Karmada API server with the webhook URL pointing at the sandbox's running
  carbonshift, turns an opted-in PropagationPolicy into a decided one (and before the
  install, and after the uninstall, the same apply is stored undecided); `helm upgrade`
  changes the registration in place; `helm uninstall` leaves no object of the release.
- the karmada target's host half and the cluster target (both ci/ values files) pass
  `kubectl apply --dry-run=server`, in a namespace that enforces the `restricted` Pod
  Security Standard as manifests/base's does.

For the install test, the sandbox's own carbonshift registration (the same webhooks, the
same namespace label) is removed while the test runs, so that only the chart's can decide a
policy; it is put back afterwards as the sandbox registers it.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e_support import DECISION, Kube, propagation_policy, unavailable, unique

from devtools.sandbox import Sandbox
from devtools.sandbox.objects import CARBONSHIFT_WEBHOOK_CONFIG, carbonshift_webhook_configuration
from devtools.sandbox.pki import b64

CHART = Path(__file__).resolve().parents[2] / "charts" / "carbonshift"
CI = CHART / "ci"
INSTANCE = "app.kubernetes.io/instance"
CRD_KINDS = {"Certificate", "Issuer", "ServiceMonitor"}
"""Kinds whose CRDs (cert-manager, Prometheus Operator) the sandbox does not install."""

SETTLE_SECONDS = 20.0
"""How long the API server may take to start (or stop) calling a new (or removed)
registration."""


class Helm:
    """The cached Helm binary against the sandbox's Karmada API server."""

    def __init__(self, binary: Path, sandbox: Sandbox, home: Path) -> None:
        self.binary = binary
        self.sandbox = sandbox
        self.env = {
            **os.environ,
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_DATA_HOME": str(home / "data"),
            "KUBECONFIG": str(sandbox.kubeconfig),
        }

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.binary), *args, "--kubeconfig", str(self.sandbox.kubeconfig)],
            capture_output=True, text=True, check=False, timeout=180, env=self.env,
        )  # fmt: skip

    def ok(self, *args: str) -> str:
        result = self.run(*args)
        assert result.returncode == 0, f"helm {' '.join(args)}:\n{result.stdout}{result.stderr}"
        return result.stdout

    def template(self, namespace: str, *args: str) -> list[dict[str, Any]]:
        out = self.ok("template", "carbonshift", str(CHART), "-n", namespace, *args)
        return [doc for doc in yaml.safe_load_all(out) if doc]


@pytest.fixture(scope="module")
def helm(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Helm:
    """hack/build-helm.sh into the sandbox's binary cache (a warm run builds nothing)."""
    log = tmp_path_factory.mktemp("helm") / "build.log"
    with log.open("w") as out:
        result = subprocess.run(
            [str(sandbox.layout.root / "hack" / "build-helm.sh")],
            stdout=out, stderr=subprocess.STDOUT, check=False, timeout=3600,
            env={**os.environ, "CARBONSHIFT_CACHE": str(sandbox.layout.bin)},
        )  # fmt: skip
    if result.returncode != 0:
        unavailable(f"hack/build-helm.sh failed ({result.returncode}):\n{log.read_text()[-3000:]}")
    return Helm(sandbox.layout.bin / "helm", sandbox, tmp_path_factory.mktemp("helm-home"))


# ----------------------------------------------------------------------------- helpers


def restricted_namespace(kube: Kube) -> str:
    """A fresh namespace labelled as manifests/base/namespace.yaml labels its own."""
    base = yaml.safe_load((CHART.parents[1] / "manifests" / "base" / "namespace.yaml").read_text())
    name = unique("e2e-chart")
    kube.apply({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": name, "labels": base["metadata"]["labels"]}})  # fmt: skip
    return name


def dry_run(kube: Kube, documents: list[dict[str, Any]]) -> str:
    """`kubectl apply --dry-run=server` of every document whose kind the API server knows;
    returns kubectl's stderr (warnings)."""
    served = [d for d in documents if d["kind"] not in CRD_KINDS]
    result = kube.run("apply", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump_all(served))
    assert result.returncode == 0, result.stderr
    for doc in served:
        assert f"{doc['metadata']['name']}" in result.stdout, (doc["kind"], result.stdout)
    return result.stderr


def decided(kube: Kube, namespace: str) -> bool:
    """Apply a new opted-in PropagationPolicy: did it come back with a decision?"""
    stored = kube.apply_json(propagation_policy(unique("web"), namespace))
    return DECISION in (stored["metadata"].get("annotations") or {})


def settles(kube: Kube, namespace: str, *, expected: bool) -> None:
    """Until a fresh apply is (or is not) decided: the API server's webhook configuration
    follows the stored registrations within a moment."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while decided(kube, namespace) != expected:
        assert time.monotonic() < deadline, f"a new policy still {'un' * expected}decided"
        time.sleep(0.5)


def release_objects(kube: Kube, release: str, namespace: str) -> list[str]:
    """Every object labelled with the release: cluster-scoped and in its namespace."""
    selector = f"{INSTANCE}={release}"
    found = kube.ok(
        "get", "mutatingwebhookconfigurations,clusterroles,clusterrolebindings",
        "-l", selector, "-o", "name",
    ).split()  # fmt: skip
    found += kube.ok(
        "get", "deployments,services,configmaps,secrets,serviceaccounts,roles,rolebindings,"
        "poddisruptionbudgets,networkpolicies",
        "-n", namespace, "-l", selector, "-o", "name",
    ).split()  # fmt: skip
    return found


@pytest.fixture
def without_sandbox_registration(sandbox: Sandbox, kube: Kube) -> Iterator[None]:
    """The sandbox's own carbonshift registration removed for the test, then put back."""
    kube.ok("delete", "mutatingwebhookconfiguration", CARBONSHIFT_WEBHOOK_CONFIG)
    try:
        yield
    finally:
        ca_bundle = b64((sandbox.layout.pki / "ca.crt").read_bytes())
        webhook = carbonshift_webhook_configuration(
            sandbox.layout.root / "manifests" / "base" / "webhook.yaml",
            f"{sandbox.carbonshift_url}/mutate",
            ca_bundle,
        )
        sandbox.apply([webhook])
        # The next test finds it in force again.
        settles(kube, kube.namespace(enabled=True), expected=True)


# ----------------------------------------------------------------------------- karmada


@pytest.mark.usefixtures("without_sandbox_registration")
def test_helm_installs_the_karmada_apiserver_objects_and_uninstalls_them(
    sandbox: Sandbox, kube: Kube, helm: Helm
) -> None:
    release = unique("carbonshift")
    namespace = unique("e2e-helm")  # carbonshift's namespace in the karmada-apiserver
    policies = kube.namespace(enabled=True)
    url = f"{sandbox.carbonshift_url}/mutate"
    install = (
        str(CHART), "-n", namespace,
        "-f", str(CI / "karmada-apiserver-values.yaml"),
        "--set", f"fullnameOverride={release}",
        "--set", f"webhook.url={url}",
        "--set-file", f"certificates.caBundle={sandbox.layout.pki / 'ca.crt'}",
    )  # fmt: skip
    try:
        # Nothing decides an opted-in policy yet.
        settles(kube, policies, expected=False)

        helm.ok("install", release, *install, "--create-namespace")
        registration = kube.get("mutatingwebhookconfiguration", release)
        assert [h["clientConfig"]["url"] for h in registration["webhooks"]] == [url, url]
        assert all(h["failurePolicy"] == "Ignore" for h in registration["webhooks"])
        settles(kube, policies, expected=True)
        stored = kube.apply_json(propagation_policy(unique("web"), policies))
        assert stored["metadata"]["annotations"][DECISION]  # what carbonshift decided, and why

        # The identity the host's pod uses may do what carbonshift does, and no more.
        account = f"system:serviceaccount:{namespace}:{release}"
        for verb, resource, where, allowed in [
            ("patch", "clusters.cluster.karmada.io", (), "yes"),
            ("update", "propagationpolicies.policy.karmada.io", ("-n", policies), "yes"),
            ("create", "events.events.k8s.io", ("-n", "default"), "yes"),
            ("create", "leases.coordination.k8s.io", ("-n", namespace), "yes"),
            ("update", "leases.coordination.k8s.io/carbonshift-leader", ("-n", namespace), "yes"),
            ("list", "resourcebindings.work.karmada.io", ("-A",), "yes"),
            ("create", "workloadrebalancers.apps.karmada.io", (), "yes"),
            ("update", "resourcebindings.work.karmada.io", ("-A",), "yes"),
            ("delete", "resourcebindings.work.karmada.io", ("-A",), "no"),
            ("delete", "clusters.cluster.karmada.io", (), "no"),
            ("create", "propagationpolicies.policy.karmada.io", ("-n", policies), "no"),
            ("update", "leases.coordination.k8s.io/other", ("-n", namespace), "no"),
        ]:
            answer = kube.run("auth", "can-i", verb, resource, *where, f"--as={account}")
            assert answer.stdout.strip() == allowed, (verb, resource, answer.stdout, answer.stderr)

        # An upgrade changes the registration in place and it keeps deciding.
        helm.ok("upgrade", release, *install, "--set", "webhook.timeoutSeconds=5")
        registration = kube.get("mutatingwebhookconfiguration", release)
        assert [h["timeoutSeconds"] for h in registration["webhooks"]] == [5, 5]
        assert decided(kube, policies)
        history = json.loads(helm.ok("history", release, "-n", namespace, "-o", "json"))
        assert [entry["revision"] for entry in history] == [1, 2]

        helm.ok("uninstall", release, "-n", namespace, "--wait")
        assert release_objects(kube, release, namespace) == []
        assert kube.ok("get", "secrets", "-n", namespace, "-l", "owner=helm", "-o", "name") == ""
        assert json.loads(helm.ok("list", "-n", namespace, "-a", "-o", "json")) == []
        settles(kube, policies, expected=False)
    finally:
        helm.run("uninstall", release, "-n", namespace)
        kube.run("delete", "namespace", namespace, "--wait=false")


# ----------------------------------------------------------------------------- dry runs


def test_the_karmada_host_objects_pass_a_server_side_dry_run(kube: Kube, helm: Helm) -> None:
    namespace = restricted_namespace(kube)
    documents = helm.template(namespace, "-f", str(CI / "karmada-host-values.yaml"))
    assert {"Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy"} <= {
        d["kind"] for d in documents
    }
    warnings = dry_run(kube, documents)
    assert "PodSecurity" not in warnings, warnings


@pytest.mark.parametrize("values", ["cluster-values.yaml", "cluster-self-managed-values.yaml"])
def test_the_cluster_target_passes_a_server_side_dry_run(
    kube: Kube, helm: Helm, values: str
) -> None:
    namespace = restricted_namespace(kube)
    # A name of its own: the sandbox already has cluster-scoped objects named carbonshift.
    name = unique("carbonshift")
    documents = helm.template(
        namespace, "-f", str(CI / values), "--set", f"fullnameOverride={name}"
    )
    kinds = {d["kind"] for d in documents}
    assert {"Deployment", "MutatingWebhookConfiguration", "ClusterRole", "Role"} <= kinds
    warnings = dry_run(kube, documents)
    assert "PodSecurity" not in warnings, warnings
    # A dry run stores nothing.
    assert kube.run("get", "deployment", name, "-n", namespace).returncode != 0
