"""The real schedulers against carbonshift's scheduler API.

Karmada: the sandbox's karmada-controller-manager and our karmada-scheduler with the
CarbonAware plugin, with its three member clusters, real API servers that Karmada found
Ready (member-se ~23, member-fr ~99, member-pl ~819 gCO2eq/kWh). kube-scheduler: the
extender configured over HTTPS, ``ignorable: true``, with fake Nodes in grids of
different intensity.

Every binary comes from ``hack/build-binaries.sh`` (the session ``sandbox`` fixture
builds them). Under ``CI=true`` a binary that is missing or does not start fails.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import pytest
import yaml
from e2e_support import (
    DEMO,
    WEIGHTED,
    Kube,
    eventually,
    propagation_policy,
    unavailable,
    unique,
    weights,
)
from e2e_support import deployment as workload

from devtools.sandbox import Component, KeyPair, Sandbox, SandboxError, free_port, serving_pair

pytestmark = pytest.mark.timeout(900)

LOOPBACK = "127.0.0.1"
GREENEST, _, DIRTIEST = DEMO
MAX_INTENSITY = "carbonshift.io/max-intensity"
REPLICAS = 10
T = TypeVar("T")


def start(sandbox: Sandbox, component: Component, timeout: float = 90.0) -> None:
    """Register ``component`` with the sandbox and start it (stopped by the fixture)."""
    sandbox.components[component.name] = component
    try:
        sandbox.start(component.name, timeout=timeout)
    except SandboxError as exc:
        sandbox.stop(component.name)
        unavailable(f"{component.name} did not start: {exc}")


def binary(sandbox: Sandbox, name: str) -> str:
    try:
        return str(sandbox.layout.binary(name))
    except SandboxError as exc:
        unavailable(str(exc))


@contextmanager
def carbonshift_stopped(sandbox: Sandbox) -> Iterator[None]:
    """Stop carbonshift for the block, then start it again for the other tests."""
    sandbox.stop("carbonshift")
    try:
        yield
    finally:
        sandbox.start("carbonshift")


# --------------------------------------------------------------------------- Karmada


@pytest.fixture(scope="module")
def karmada(sandbox: Sandbox) -> Sandbox:
    """The sandbox's karmada-controller-manager and karmada-scheduler (with the plugin)."""
    missing = {"karmada-controller-manager", "karmada-scheduler"} - set(sandbox.running())
    if missing:
        unavailable(f"the sandbox does not run {', '.join(sorted(missing))}")
    return sandbox


def deployment(
    name: str, namespace: str, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    return workload(name, namespace, replicas=REPLICAS, cpu="100m", annotations=annotations)


EQUAL_WEIGHTS = {
    "replicaScheduling": {
        "replicaSchedulingType": "Divided",
        "replicaDivisionPreference": "Weighted",
        "weightPreference": {
            "staticWeightList": [
                {"targetCluster": {"clusterNames": [c]}, "weight": 1} for c in DEMO
            ]
        },
    }
}
"""User-owned equal weights: carbonshift's admission webhook leaves them alone, so only
the scheduler plugin's filter can keep replicas off a cluster."""


def place(
    kube: Kube,
    namespace: str,
    *,
    placement: dict[str, Any] | None = None,
    annotations: dict[str, str] | None = None,
    policy_annotations: dict[str, str] | None = None,
) -> tuple[dict[str, Any], dict[str, int]]:
    """Create a policy (``policy_annotations``) and a Deployment (``annotations``); wait
    until Karmada schedules the binding.

    Returns the policy as stored and cluster -> replicas from the ResourceBinding.
    """
    name = unique("app")
    body = propagation_policy(name, namespace, placement=placement, annotations=policy_annotations)
    policy = kube.apply_json(body)
    kube.apply(deployment(name, namespace, annotations))

    def scheduled() -> dict[str, int] | None:
        result = kube.run("get", "resourcebindings.work.karmada.io", f"{name}-deployment",
                          "-n", namespace, "-o", "json")  # fmt: skip
        if result.returncode != 0:
            return None
        binding = json.loads(result.stdout)
        conditions = binding.get("status", {}).get("conditions", [])
        done = any(c["type"] == "Scheduled" and c["status"] == "True" for c in conditions)
        clusters = binding["spec"].get("clusters") or []
        if not done or not clusters:
            return None
        return {c["name"]: c.get("replicas", 0) for c in clusters}

    return policy, eventually(scheduled, f"ResourceBinding {namespace}/{name}-deployment")


def test_divided_policy_gives_the_greenest_cluster_the_most_replicas(
    karmada: Sandbox, kube: Kube
) -> None:
    namespace = kube.namespace(enabled=True)
    policy, replicas = place(kube, namespace, policy_annotations=WEIGHTED)
    w = weights(policy)
    assert set(w) == set(DEMO), f"carbonshift did not weight the policy: {policy['spec']}"
    assert w[GREENEST] > w[DIRTIEST]
    assert sum(replicas.values()) == REPLICAS
    assert replicas[GREENEST] == max(replicas.values())
    total = sum(w[c] for c in replicas)
    for cluster, count in replicas.items():  # Webster: within one seat of the quota
        assert abs(count - REPLICAS * w[cluster] / total) <= 1, (replicas, w)
    # Replicas never increase with intensity.
    ordered = [replicas.get(c, 0) for c in DEMO]
    assert ordered == sorted(ordered, reverse=True), (replicas, w)


def test_max_intensity_keeps_the_dirtiest_cluster_out_through_the_filter(
    karmada: Sandbox, kube: Kube
) -> None:
    namespace = kube.namespace(enabled=True)
    # Control: with equal user weights, every cluster gets replicas.
    _, control = place(kube, namespace, placement=EQUAL_WEIGHTS)
    assert set(control) == set(DEMO), control
    # max-intensity on the workload (not the policy): only the plugin's filter sees it.
    policy, replicas = place(
        kube, namespace, placement=EQUAL_WEIGHTS, annotations={MAX_INTENSITY: "300"}
    )
    assert set(weights(policy)) == set(DEMO), "the policy still allows the dirtiest cluster"
    assert DIRTIEST not in replicas, replicas
    assert set(replicas) == {GREENEST, "member-fr"}
    assert sum(replicas.values()) == REPLICAS


def test_spread_constraint_picks_the_greenest_cluster_through_the_score(
    karmada: Sandbox, kube: Kube
) -> None:
    # Karmada ranks clusters by score only under spreadConstraints: with maxGroups 1 it
    # keeps the best-scored cluster. The in-tree scores and the clusters' resources are
    # equal here, and Karmada breaks ties by name (member-fr first); member-se wins only
    # through the CarbonAware score. The namespace is not opted in: the admission webhook
    # leaves the policy alone, the scheduler plugin still scores.
    namespace = kube.namespace(enabled=False)
    spread = {
        "spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 1, "minGroups": 1}],
        "replicaScheduling": {"replicaSchedulingType": "Duplicated"},
    }
    policy, replicas = place(kube, namespace, placement=spread)
    annotations = policy["metadata"].get("annotations") or {}
    assert not [k for k in annotations if k.startswith("carbonshift.io/")], annotations
    assert sorted(replicas) == [GREENEST], replicas
    assert sorted(DEMO)[0] != GREENEST  # the name tie-break alone would not pick it


def test_scheduling_completes_when_carbonshift_is_down(karmada: Sandbox, kube: Kube) -> None:
    namespace = kube.namespace(enabled=True)
    with carbonshift_stopped(karmada):
        _, replicas = place(
            kube, namespace, placement=EQUAL_WEIGHTS, annotations={MAX_INTENSITY: "300"}
        )
    # Fail open: the filter let every cluster pass.
    assert set(replicas) == set(DEMO), replicas
    assert sum(replicas.values()) == REPLICAS


# --------------------------------------------------------------------------- kube-scheduler


@pytest.fixture(scope="module")
def kube_scheduler(sandbox: Sandbox) -> Iterator[Sandbox]:
    """kube-scheduler with carbonshift as an ignorable HTTPS extender."""
    lay = sandbox.layout
    folder = lay.state / "kube-scheduler"
    folder.mkdir(parents=True, exist_ok=True)
    serving_pair(KeyPair.read(lay.pki, "ca.crt", "ca.key"), "kube-scheduler").write(folder)
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(lay.kubeconfig)},
        "leaderElection": {"leaderElect": False},
        "extenders": [{
            "urlPrefix": f"{sandbox.carbonshift_url}/v1/extender",
            "filterVerb": "filter",
            "prioritizeVerb": "prioritize",
            "weight": 1,
            "enableHTTPS": True,
            "tlsConfig": {"caFile": str(lay.pki / "ca.crt")},
            "httpTimeout": "2s",
            "nodeCacheCapable": False,
            "ignorable": True,
        }],
    }  # fmt: skip
    (folder / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    port = free_port()
    component = Component(
        "kube-scheduler",
        [
            binary(sandbox, "kube-scheduler"),
            f"--config={folder / 'config.yaml'}",
            f"--bind-address={LOOPBACK}",
            f"--secure-port={port}",
            f"--tls-cert-file={folder / 'tls.crt'}",
            f"--tls-private-key-file={folder / 'tls.key'}",
            "--v=2",
        ],
        f"https://{LOOPBACK}:{port}/healthz",
    )
    try:
        start(sandbox, component)
        yield sandbox
    finally:
        sandbox.stop("kube-scheduler")


@pytest.fixture(scope="module")
def node_pool(kube_scheduler: Sandbox) -> dict[str, str]:
    """Two schedulable Nodes: one in Sweden (SE-SE3), one in Poland (PL).

    Returns the label that selects only these nodes, and their names.
    """
    kube = Kube(kube_scheduler)
    pool = unique("pool")
    nodes = {
        "green": (unique("node-se"), "eu-north-1", "eu-north-1a"),
        "dirty": (unique("node-pl"), "europe-central2", "europe-central2-a"),
    }
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    resources = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    for name, region, zone in nodes.values():
        kube.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "e2e-pool": pool,
            "topology.kubernetes.io/region": region, "topology.kubernetes.io/zone": zone,
        }}})  # fmt: skip
        status = {"capacity": resources, "allocatable": resources, "conditions": [{
            "type": "Ready", "status": "True", "reason": "KubeletReady", "message": "e2e",
            "lastHeartbeatTime": now, "lastTransitionTime": now,
        }]}  # fmt: skip
        kube.ok("patch", "node", name, "--subresource=status", "--type=merge",
                "-p", json.dumps({"status": status}))  # fmt: skip
        # The TaintNodesByCondition admission plugin taints new nodes not-ready; no node
        # lifecycle controller runs here to lift it once the node reports Ready.
        kube.ok("patch", "node", name, "--type=merge", "-p", '{"spec": {"taints": null}}')
    return {"pool": pool, **{k: v[0] for k, v in nodes.items()}}


def bound_node(
    kube: Kube, node_pool: dict[str, str], annotations: dict[str, str], prefer: str | None = None
) -> str:
    """Create a pending Pod for the pool and wait until kube-scheduler binds it.

    ``prefer`` adds a preferred node affinity (weight 100) for that node: NodeAffinity's
    score (x2) then outweighs the extender's greenness difference (x10 per point).
    """
    namespace = kube.namespace(enabled=False)
    name = unique("pod")
    spec: dict[str, Any] = {"nodeSelector": {"e2e-pool": node_pool["pool"]}, "containers": [{
        "name": "app", "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": {"cpu": "100m"}},
    }]}  # fmt: skip
    if prefer is not None:
        term = {"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [prefer]},
        ]}  # fmt: skip
        spec["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "preference": term},
        ]}}  # fmt: skip
    kube.apply({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "spec": spec,
    })  # fmt: skip

    def node_name() -> str | None:
        spec = kube.get("pod", name, namespace)["spec"]
        return spec.get("nodeName") or None

    return eventually(node_name, f"pod {namespace}/{name} to be bound")


def extender_calls(sandbox: Sandbox) -> float:
    """carbonshift_scheduler_requests_total for successful extender prioritize calls."""
    import ssl  # noqa: PLC0415
    import urllib.request  # noqa: PLC0415

    context = ssl.create_default_context(cafile=str(sandbox.layout.pki / "ca.crt"))
    with urllib.request.urlopen(f"{sandbox.carbonshift_url}/metrics", context=context) as r:
        text = r.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith("carbonshift_scheduler_requests_total{") and (
            'endpoint="extender/prioritize"' in line and 'outcome="ok"' in line
        ):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_pod_is_bound_to_the_greener_node(
    kube_scheduler: Sandbox, node_pool: dict[str, str]
) -> None:
    kube = Kube(kube_scheduler)
    before = extender_calls(kube_scheduler)
    placed = [bound_node(kube, node_pool, {}) for _ in range(3)]
    assert placed == [node_pool["green"]] * 3
    assert extender_calls(kube_scheduler) >= before + 3


def test_max_intensity_keeps_the_pod_off_the_dirty_node_through_the_filter(
    kube_scheduler: Sandbox, node_pool: dict[str, str]
) -> None:
    kube = Kube(kube_scheduler)
    green, dirty = node_pool["green"], node_pool["dirty"]
    # Control: a strong affinity for the dirty node beats the extender's scores.
    assert bound_node(kube, node_pool, {}, prefer=dirty) == dirty
    # max-intensity below the dirty grid: the extender's filter removes that node.
    assert bound_node(kube, node_pool, {MAX_INTENSITY: "300"}, prefer=dirty) == green


def test_pod_still_binds_when_the_extender_is_down(
    kube_scheduler: Sandbox, node_pool: dict[str, str]
) -> None:
    kube = Kube(kube_scheduler)
    with carbonshift_stopped(kube_scheduler):
        node = bound_node(kube, node_pool, {})
    assert node in (node_pool["green"], node_pool["dirty"])
