"""Carbon labels on Karmada Clusters, written by real ``carbonshift serve`` replicas with a
kubeconfig against the sandbox API server: a new Cluster gets ``carbonshift.io/intensity``
and its annotations within seconds; of two replicas exactly one holds the Lease and writes,
and after SIGKILL the other takes over and keeps the labels following the data; with
``labels.enabled: false`` nothing is written."""

from __future__ import annotations

import contextlib
import json
import os
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e_support import Kube, more_passes, unique

from devtools.sandbox import Sandbox
from devtools.sandbox.layout import free_port
from webhook.model import vocabulary

CLUSTERS = "cluster.cluster.karmada.io"
TAKEOVER_SECONDS = 20.0


def eventually(
    check: Callable[[], Any],
    timeout: float = 15.0,
    what: str = "condition",
    shown: Callable[[], object] | None = None,
) -> Any:
    """Poll ``check()`` until it returns something truthy; returns that. On a timeout the
    message shows what ``check()`` (or ``shown()``, when given) last returned."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() >= deadline:
            seen = shown() if shown is not None else got
            raise AssertionError(f"{what} not reached in {timeout:g} s; last seen: {seen!r}")
        time.sleep(0.2)


class Replica:
    """One ``carbonshift serve --kubeconfig`` process (the helper the sandbox does not have)."""

    def __init__(self, sandbox: Sandbox, tmp: Path, name: str, config: Path, lease: str) -> None:
        self.name = name
        self.port = free_port()
        self.log = tmp / f"{name}.log"
        command = [
            *sandbox.carbonshift_command, "serve", f"--config={config}",
            "--host=127.0.0.1", f"--port={self.port}", f"--cert-dir={tmp / name}",
            f"--kubeconfig={sandbox.kubeconfig}", "--lease-namespace=default",
            f"--lease-name={lease}",
        ]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if k not in ("POD_NAMESPACE", "KUBECONFIG")}
        with self.log.open("w") as out:
            self.process = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, env={**env, "POD_NAME": name}
            )

    def metric(self, name: str) -> float:
        """Sum of every sample of ``name`` on /metrics (0 when absent)."""
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        url = f"https://127.0.0.1:{self.port}/metrics"
        with urllib.request.urlopen(url, context=context, timeout=5) as answer:
            text = answer.read().decode()
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith(name) and line[len(name) : len(name) + 1] in ("{", " ")
        )

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)


@contextlib.contextmanager
def replicas(
    sandbox: Sandbox, tmp: Path, count: int, *, enabled: bool = True
) -> Iterator[tuple[str, list[Replica]]]:
    """``count`` replicas sharing a fresh Lease in ``default``; yields (lease, replicas)."""
    config = yaml.safe_load(sandbox.layout.carbonshift_config.read_text())
    config["labels"] = {"enabled": enabled, "min_interval_seconds": 0, "interval_seconds": 1}
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    lease = unique("labels-leader")
    started = [Replica(sandbox, tmp, f"{lease}-{i}", path, lease) for i in range(count)]
    try:
        yield lease, started
    except BaseException:
        for replica in started:
            print(f"--- {replica.name}\n" + "\n".join(replica.log.read_text().splitlines()[-40:]))
        raise
    finally:
        for replica in started:
            replica.stop()


def holder(kube: Kube, lease: str) -> str | None:
    result = kube.run(
        "get", "lease", lease, "-n", "default", "-o", "jsonpath={.spec.holderIdentity}"
    )
    if result.returncode != 0:
        return None
    return result.stdout.strip() or None


def karmada_cluster(name: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "cluster.karmada.io/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": name, "labels": labels or {"team": "shop"}},
        "spec": {"syncMode": "Push", "apiEndpoint": "https://127.0.0.1:1", **spec},
    }


def marks(kube: Kube, name: str) -> tuple[dict[str, str], dict[str, str]]:
    meta = kube.get(CLUSTERS, name)["metadata"]
    return meta.get("labels") or {}, meta.get("annotations") or {}


def intensity_class(kube: Kube, name: str) -> str | None:
    return marks(kube, name)[0].get(vocabulary.INTENSITY_CLASS)


@pytest.fixture
def cluster(kube: Kube) -> Iterator[str]:
    name = unique("labels-aws")
    kube.apply(karmada_cluster(name, provider="aws", region="eu-north-1"))
    try:
        yield name
    finally:
        kube.run("delete", CLUSTERS, name, "--wait=false")


def test_a_cluster_gets_its_intensity_label_and_annotations_within_seconds(
    sandbox: Sandbox, kube: Kube, tmp_path: Path, cluster: str
) -> None:
    with replicas(sandbox, tmp_path, 1) as (lease, _):
        eventually(lambda: holder(kube, lease), what="a Lease holder")
        took = time.monotonic()
        eventually(lambda: intensity_class(kube, cluster), what="the intensity label")
        assert time.monotonic() - took < 10.0
        labels, annotations = marks(kube, cluster)
        assert labels[vocabulary.INTENSITY_CLASS] == "low"  # SE-SE3, 23 gCO2eq/kWh
        assert labels["team"] == "shop"  # other labels untouched
        assert annotations[vocabulary.INTENSITY_ZONE] == "SE-SE3"
        assert annotations[vocabulary.INTENSITY_SOURCE].startswith("static")
        assert float(annotations[vocabulary.INTENSITY_VALUE]) < 150
        vocabulary.timestamp(vocabulary.INTENSITY_TIME, annotations[vocabulary.INTENSITY_TIME])
        vocabulary.timestamp(vocabulary.INTENSITY_SINCE, annotations[vocabulary.INTENSITY_SINCE])
        shown = kube.ok("get", CLUSTERS, cluster, "-o", "json", "--show-managed-fields")
        managed = json.loads(shown)["metadata"]["managedFields"]
        ours = [f for f in managed if f["manager"] == "carbonshift"]
        assert len(ours) == 1
        assert ours[0]["operation"] == "Apply"
        owned = ours[0]["fieldsV1"]["f:metadata"]
        keys = [k for part in owned.values() for k in part if k.startswith("f:")]
        assert keys
        assert all(k.startswith("f:carbonshift.io/") for k in keys), keys


def test_one_of_two_replicas_writes_and_the_other_takes_over_after_sigkill(
    sandbox: Sandbox, kube: Kube, tmp_path: Path, cluster: str
) -> None:
    with replicas(sandbox, tmp_path, 2) as (lease, pair):
        first = eventually(lambda: holder(kube, lease), what="a Lease holder")
        eventually(lambda: intensity_class(kube, cluster) == "low", what="the first label")
        (leader,) = [r for r in pair if r.name == first]
        (other,) = [r for r in pair if r.name != first]
        writes = "carbonshift_cluster_label_writes_total"
        eventually(lambda: leader.metric(writes) >= 1, what="the leader's writes")
        assert leader.metric("carbonshift_leader") == 1
        assert other.metric("carbonshift_leader") == 0
        assert other.metric(writes) == 0

        leader.process.kill()
        killed = time.monotonic()
        eventually(lambda: holder(kube, lease) == other.name, TAKEOVER_SECONDS, "the takeover")
        assert time.monotonic() - killed < TAKEOVER_SECONDS

        kube.ok("label", CLUSTERS, cluster, f"{vocabulary.ZONE}=PL")  # a dirtier grid
        eventually(lambda: intensity_class(kube, cluster) == "high", what="the class to follow")
        annotations = marks(kube, cluster)[1]
        assert annotations[vocabulary.INTENSITY_ZONE] == "PL"
        assert other.metric(writes) >= 1
        assert other.metric("carbonshift_leader") == 1

        def class_events() -> list[dict[str, Any]]:
            out = kube.ok("get", "events.events.k8s.io", "-n", "default", "-o", "yaml")
            return [
                e
                for e in yaml.safe_load(out)["items"]
                if e.get("regarding", {}).get("name") == cluster
                and e.get("reason") == "IntensityClassChanged"
            ]

        found = eventually(lambda: len(class_events()) >= 2, what="two class Events")
        assert found
        notes = [e["note"] for e in class_events()]
        assert any("low -> high" in n and "PL" in n and "high_from" in n for n in notes), notes


def test_labels_switched_off_write_nothing(
    sandbox: Sandbox, kube: Kube, tmp_path: Path, cluster: str
) -> None:
    with replicas(sandbox, tmp_path, 1, enabled=False) as (lease, (replica,)):
        eventually(lambda: holder(kube, lease) == replica.name, what="leadership")
        # the leader's other controllers run their passes; a labeler would have written by now
        more_passes(lambda: replica.metric("carbonshift_controller_passes_total"), 3)
        labels, annotations = marks(kube, cluster)
        assert vocabulary.INTENSITY_CLASS not in labels
        assert not [k for k in annotations if k.startswith("carbonshift.io/")]
        assert replica.metric("carbonshift_cluster_label_writes_total") == 0


SERVICE_ACCOUNT = "system:serviceaccount:carbonshift-system:carbonshift"
ALLOWED = [
    ("watch", "clusters.cluster.karmada.io"),
    ("get", "clusters.cluster.karmada.io"),
    ("patch", "clusters.cluster.karmada.io"),
    ("list", "propagationpolicies.policy.karmada.io", "-A"),
    ("update", "propagationpolicies.policy.karmada.io", "-A"),
    ("update", "clusterpropagationpolicies.policy.karmada.io"),
    ("list", "namespaces"),
    ("watch", "clusterpropagationpolicies.policy.karmada.io"),
    ("list", "nodepools.karpenter.sh"),
    ("update", "nodepools.karpenter.sh"),
    ("create", "events.events.k8s.io", "-n", "default"),
    ("patch", "events.events.k8s.io", "-n", "shop"),
    ("create", "leases.coordination.k8s.io", "-n", "carbonshift-system"),
    ("update", "leases.coordination.k8s.io/carbonshift-leader", "-n", "carbonshift-system"),
    ("get", "configmaps/carbonshift-config", "-n", "carbonshift-system"),
    ("list", "resourcebindings.work.karmada.io", "-A"),
    ("watch", "clusterresourcebindings.work.karmada.io"),
    ("create", "workloadrebalancers.apps.karmada.io"),
    ("watch", "workloadrebalancers.apps.karmada.io"),  # the rebalancer's watched cache
    ("delete", "workloadrebalancers.apps.karmada.io"),
    ("update", "resourcebindings.work.karmada.io", "-A"),  # requiredBy: non-workloads follow
    ("list", "pods", "-A"),  # NamespaceOffloadings' pods on virtual nodes, accounted
]
REFUSED = [
    ("delete", "clusters.cluster.karmada.io"),
    ("update", "clusters.cluster.karmada.io"),
    ("create", "clusters.cluster.karmada.io"),
    ("patch", "propagationpolicies.policy.karmada.io", "-A"),
    ("delete", "propagationpolicies.policy.karmada.io", "-A"),
    ("update", "namespaces"),
    ("patch", "nodepools.karpenter.sh"),
    ("delete", "resourcebindings.work.karmada.io", "-A"),
    ("patch", "clusterresourcebindings.work.karmada.io"),
    ("update", "workloadrebalancers.apps.karmada.io"),
    ("delete", "nodepools.karpenter.sh"),
    ("delete", "events.events.k8s.io", "-n", "default"),
    ("create", "leases.coordination.k8s.io", "-n", "default"),
    ("update", "leases.coordination.k8s.io/other", "-n", "carbonshift-system"),
    ("delete", "leases.coordination.k8s.io/carbonshift-leader", "-n", "carbonshift-system"),
    ("get", "secrets", "-n", "carbonshift-system"),
    ("get", "configmaps/other", "-n", "carbonshift-system"),
]


def test_rbac_grants_exactly_what_carbonshift_needs(sandbox: Sandbox, kube: Kube) -> None:
    rendered = sandbox.kubectl("kustomize", str(sandbox.layout.root / "manifests" / "base"))
    kinds = {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role"}
    rbac = [d for d in yaml.safe_load_all(rendered.stdout) if d and d["kind"] in kinds]
    rbac += [
        d
        for d in yaml.safe_load_all(rendered.stdout)
        if d and d["kind"] == "RoleBinding"  # after its Role
    ]
    assert len(rbac) == 6
    kube.ok("apply", "-f", "-", stdin=yaml.safe_dump_all(rbac))
    try:
        for check in ALLOWED + REFUSED:
            verb, resource, *scope = check
            result = kube.run("auth", "can-i", verb, resource, *scope, f"--as={SERVICE_ACCOUNT}")
            assert result.stdout.strip() == ("yes" if check in ALLOWED else "no"), check
    finally:
        kube.run("delete", "clusterrolebinding/carbonshift", "clusterrole/carbonshift")
