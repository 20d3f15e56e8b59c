"""What Karpenter launches under carbonshift's NodePool strategies, in a real workload
cluster (``devtools.sandbox.workload``): its own etcd and kube-apiserver,
kube-controller-manager, kube-scheduler, the real Karpenter controller with its kwok cloud
provider, the KWOK controller (Nodes Ready, pods Running) and ``carbonshift serve`` as its
NodePool webhook and leader (re-evaluation every second), reading the local grid DE from a
local Electricity Maps v3 server.

One cluster for the module. While DE is dirty every scenario starts at once: a ``pause``
pool with pending pods, an ``efficiency`` pool with pods, a ``weight`` pool next to a plain
pool of fixed weight, and a pod that asks for green capacity. After at least 60 s the grid
turns clean and the rest follows: (a) the paused pool launched nothing for those 60 s, then
launches once carbonshift's re-evaluation resumes it; (b) the efficiency pool launched
arm64 nodes; (c) nodes carry the ``carbonshift.io/intensity`` template label and the
green-only pod lands only on a low pool's node; (d) Karpenter picks the pool carbonshift
weighted greener: the plain pool while dirty, the carbonshift pool once clean. Last, with
nobody re-evaluating (the leader Lease taken away), a ``carbonshift.io/refresh`` bump lifts
a pause at once and Karpenter launches.
"""

from __future__ import annotations

import contextlib
import json
import os
import ssl
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e_support import build_binaries, more_passes
from test_fleet_labels import eventually
from test_reevaluate_policies import Grid

from devtools.sandbox import Layout
from devtools.sandbox.workload import NODE_CLASS, WorkloadCluster, workload_layout
from webhook.model.vocabulary import DECISION, ENABLED, INTENSITY_CLASS, REFRESH, STRATEGY

DIRTY, CLEAN = 700.0, 100.0
"""DE in gCO2eq/kWh: high (carbonshift's weight 30) and low (weight 90)."""
PLAIN_WEIGHT = 50
"""The plain pool's own weight: above the weight pool's while dirty, below it when clean."""
HOLD = 60.0
"""How long the paused pool must launch nothing while its pods wait."""

NAMESPACE = "karpenter-e2e"
POOL_LABEL = "karpenter.sh/nodepool"
GROUP = "e2e.carbonshift.io/group"
"""Template label shared by the weight pool and the plain pool: pods select either."""
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl",
            "kwok", "karpenter-kwok")  # fmt: skip


# --------------------------------------------------------------------- objects


def nodepool(
    name: str,
    strategy: str | None,
    *,
    labels: dict[str, str] | None = None,
    weight: int | None = None,
) -> dict[str, Any]:
    """A kwok NodePool, opted in to carbonshift with ``strategy`` (None: not opted in;
    "": no strategy, only the label). Any arch and zone, on-demand, no consolidation (nodes
    stay where pods landed)."""
    meta: dict[str, Any] = {"name": name}
    if strategy is not None:
        meta["labels"] = {ENABLED: "true"}
    if strategy:
        meta["annotations"] = {STRATEGY: strategy}
    spec: dict[str, Any] = {
        "template": {
            "metadata": {"labels": dict(labels or {})},
            "spec": {
                "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass",
                                 "name": NODE_CLASS},
                "requirements": [
                    {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                    {"key": "karpenter.sh/capacity-type", "operator": "In",
                     "values": ["on-demand"]},
                ],
            },
        },
        "limits": {"cpu": "100"},
        "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"},
    }  # fmt: skip
    if weight is not None:
        spec["weight"] = weight
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": meta, "spec": spec}


def pods(
    group: str, count: int, selector: dict[str, str], cpu: str = "500m"
) -> list[dict[str, Any]]:
    """``count`` pods labelled ``e2e: group`` that only fit on nodes matching ``selector``."""
    container = {
        "name": "app",
        "image": "registry.k8s.io/pause:3.10",  # never pulled: KWOK plays the kubelet
        "resources": {"requests": {"cpu": cpu, "memory": "128Mi"}},
    }
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{group}-{i}", "namespace": NAMESPACE, "labels": {"e2e": group}},
            "spec": {"nodeSelector": selector, "containers": [container]},
        }
        for i in range(count)
    ]


# --------------------------------------------------------------------- reading the cluster


def items(cluster: WorkloadCluster, *args: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)[
        "items"
    ]
    return found


def get(cluster: WorkloadCluster, resource: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(cluster.kubectl("get", resource, name, "-o", "json").stdout)
    return found


def group_pods(cluster: WorkloadCluster, group: str) -> list[dict[str, Any]]:
    return items(cluster, "pods", "-n", NAMESPACE, "-l", f"e2e={group}")


def running_on(cluster: WorkloadCluster, group: str) -> list[dict[str, Any]] | None:
    """The Ready nodes the group's pods run on, once every pod of the group runs."""
    found = group_pods(cluster, group)
    if not found or any(p["status"].get("phase") != "Running" for p in found):
        return None
    nodes = {n["metadata"]["name"]: n for n in items(cluster, "nodes")}
    hosts = [nodes.get(p["spec"].get("nodeName", "")) for p in found]
    if any(h is None or not ready(h) for h in hosts):
        return None
    return [h for h in hosts if h is not None]


def ready(node: dict[str, Any]) -> bool:
    conditions = node["status"].get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def node_labels(node: dict[str, Any]) -> dict[str, str]:
    found: dict[str, str] = node["metadata"].get("labels") or {}
    return found


def pending(cluster: WorkloadCluster, group: str) -> bool:
    """Every pod of the group is Pending and unbound, and kube-scheduler found no node."""
    found = group_pods(cluster, group)
    return bool(found) and all(
        p["status"].get("phase") == "Pending"
        and not p["spec"].get("nodeName")
        and any(
            c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
            for c in p["status"].get("conditions") or []
        )
        for p in found
    )


def events(cluster: WorkloadCluster, name: str, reason: str) -> list[dict[str, Any]]:
    out = cluster.kubectl("get", "events.events.k8s.io", "-A", "-o", "yaml").stdout
    return [
        e
        for e in yaml.safe_load(out)["items"]
        if e.get("regarding", {}).get("name") == name and e.get("reason") == reason
    ]


class NodeClaimLog:
    """Every NodeClaim the API server ever showed, from a ``kubectl get --watch``: name ->
    (pool, first seen). Nothing that appears, even briefly, goes unnoticed."""

    def __init__(self, cluster: WorkloadCluster) -> None:
        pool = "{.object.metadata.labels.karpenter\\.sh/nodepool}"
        template = f'{{.type}} {{.object.metadata.name}} {pool}{{"\\n"}}'
        kubectl = cluster.layout.bin / "kubectl"
        self.seen: dict[str, tuple[str, float]] = {}
        self.process = subprocess.Popen(
            [str(kubectl), "get", "nodeclaims.karpenter.sh", "--watch", "--output-watch-events",
             "-o", f"jsonpath={template}"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
        )  # fmt: skip
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            parts = line.split()
            if len(parts) >= 2 and parts[1] not in self.seen:
                pool = parts[2] if len(parts) > 2 else ""
                self.seen[parts[1]] = (pool, time.monotonic())

    def of(self, pool: str) -> list[str]:
        return [name for name, (owner, _) in self.seen.items() if owner == pool]

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        self.process.kill()
        self.process.wait(10)
        self.thread.join(10)
        if self.process.stdout is not None:
            self.process.stdout.close()


# --------------------------------------------------------------------- the cluster


@pytest.fixture(scope="module")
def grid() -> Iterator[Grid]:
    with Grid() as running:
        running.values["DE"] = DIRTY
        yield running


@contextlib.contextmanager
def workload_cluster(
    grid: Grid,
    state: Path,
    config: dict[str, Any] | None = None,
    instance_types: Path | None = None,
) -> Iterator[WorkloadCluster]:
    """A workload cluster whose carbonshift reads ``grid`` (Electricity Maps v3) every
    second and re-evaluates every second; ``config`` laid over that."""
    layout = workload_layout(Layout.default(state))
    build_binaries(layout, state / "build.log", *BINARIES)
    token = state / "token"
    token.write_text("e2e\n")
    base = {
        "zone": "DE",  # the grid this test's fake Electricity Maps turns
        "providers": ["electricitymaps"],
        "electricitymaps": {"url": f"{grid.fake.url}/v3", "token_file": str(token)},
        "feed": {"refresh_seconds": 1, "min_ttl_seconds": 1, "max_ttl_seconds": 1,
                 "forecasts": False},
        "hysteresis": {"margin": 0.1, "dwell_hours": 0},
        "reevaluate": {"interval_seconds": 1, "min_interval_seconds": 1},
    }  # fmt: skip
    workload = WorkloadCluster(
        layout,
        carbonshift_config={**base, **(config or {})},
        instance_types=instance_types,
        log=lambda _msg: None,
    )
    started = time.monotonic()
    workload.up()
    print(f"workload cluster up in {time.monotonic() - started:.1f} s")
    try:
        yield workload
    finally:
        for name, size in sorted(workload.rss_bytes().items()):
            print(f"RSS {name}: {size / 2**20:.0f} MiB")
        print(f"RSS total: {sum(workload.rss_bytes().values()) / 2**20:.0f} MiB")
        workload.down(keep_state=True)  # the logs stay in pytest's temporary folder
        assert not workload.running()


@pytest.fixture(scope="module")
def cluster(grid: Grid, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkloadCluster]:
    with workload_cluster(grid, tmp_path_factory.mktemp("karpenter")) as workload:
        yield workload


@dataclass
class Dirty:
    """What the scenarios started while DE was dirty."""

    claims: NodeClaimLog
    since: float
    """When the pods were created (monotonic)."""
    created: dict[str, dict[str, Any]]
    """NodePool name -> as stored at creation."""


@dataclass
class Clean:
    """What held just before DE turned clean."""

    held_for: float
    paused_claims: list[str]
    paused_pending: bool
    limited: bool
    """Karpenter said the paused pool's limits are why it launched nothing."""
    low_pending: bool
    plain_hosts: list[str]


@pytest.fixture(scope="module")
def dirty(cluster: WorkloadCluster) -> Iterator[Dirty]:
    """Every scenario, started at once while DE is dirty."""
    claims = NodeClaimLog(cluster)
    cluster.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}])
    pools = [
        nodepool("paused", "pause"),
        nodepool("efficient", "efficiency"),
        nodepool("weighted", "weight", labels={GROUP: "weight"}),
        nodepool("plain", None, labels={GROUP: "weight"}, weight=PLAIN_WEIGHT),
    ]
    cluster.apply(pools)
    created = {
        p["metadata"]["name"]: get(cluster, "nodepools", p["metadata"]["name"]) for p in pools
    }
    cluster.apply([
        *pods("hold", 2, {POOL_LABEL: "paused"}),
        *pods("arm", 2, {POOL_LABEL: "efficient"}),
        # 1.5 CPU: one per 2-CPU node, so the clean-phase pod needs a node of its own.
        *pods("dirty-weight", 1, {GROUP: "weight"}, cpu="1500m"),
        *pods("green-only", 1, {INTENSITY_CLASS: "low"}),
    ])  # fmt: skip
    try:
        yield Dirty(claims, time.monotonic(), created)
    finally:
        claims.close()


@pytest.fixture(scope="module")
def clean(cluster: WorkloadCluster, grid: Grid, dirty: Dirty) -> Clean:
    """The dirty phase settled and held for :data:`HOLD`; then DE turns clean."""
    plain = eventually(lambda: running_on(cluster, "dirty-weight"), 90.0, "the dirty-weight pod")
    eventually(lambda: running_on(cluster, "arm"), 90.0, "the efficiency pool's pods")

    def limited() -> bool:
        return any(
            "exceed limits for nodepool" in e.get("note", "") and "paused" in e["note"]
            for e in events(cluster, "hold-0", "FailedScheduling")
        )

    # Karpenter has looked at the held pods and named the paused pool's limits, and the
    # pool has launched nothing for at least HOLD seconds.
    eventually(
        lambda: time.monotonic() - dirty.since > HOLD and limited(),
        HOLD + 90.0,
        "Karpenter naming the paused pool's limits, HOLD s after the pools were made",
    )
    assert dirty.claims.alive()
    snapshot = Clean(
        held_for=time.monotonic() - dirty.since,
        paused_claims=dirty.claims.of("paused"),
        paused_pending=pending(cluster, "hold"),
        limited=limited(),
        low_pending=pending(cluster, "green-only"),
        plain_hosts=[n["metadata"]["name"] for n in plain],
    )
    grid.values["DE"] = CLEAN
    eventually(lambda: local_intensity(cluster) == CLEAN, 20.0, "carbonshift reading DE clean")
    cluster.apply([nodepool("green", "")])  # decided on the clean grid: label low
    return snapshot


def metric(cluster: WorkloadCluster, name: str, **labels: str) -> float | None:
    """The first sample of ``name`` carrying ``labels`` on carbonshift's /metrics."""
    context = ssl.create_default_context(cafile=str(cluster.layout.pki / "ca.crt"))
    with urllib.request.urlopen(f"{cluster.carbonshift_url}/metrics", context=context) as answer:
        text = answer.read().decode()
    wanted = [f'{k}="{v}"' for k, v in labels.items()]
    for line in text.splitlines():
        if line.startswith((name + "{", name + " ")) and all(w in line for w in wanted):
            return float(line.rsplit(" ", 1)[1])
    return None


def refreshes(cluster: WorkloadCluster) -> float:
    """Requests the feed has sent to the grid's provider: one more per refresh."""
    context = ssl.create_default_context(cafile=str(cluster.layout.pki / "ca.crt"))
    with urllib.request.urlopen(f"{cluster.carbonshift_url}/metrics", context=context) as answer:
        text = answer.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("carbonshift_upstream_requests_total{"))  # fmt: skip


def local_intensity(cluster: WorkloadCluster) -> float | None:
    """What carbonshift's feed holds for DE now."""
    return metric(cluster, "carbonshift_intensity_gco2eq_per_kwh", zone="DE")


def node_class_label(pool: dict[str, Any]) -> str | None:
    labels: dict[str, str] = pool["spec"]["template"]["metadata"].get("labels") or {}
    return labels.get(INTENSITY_CLASS)


# --------------------------------------------------------------------- the strategies


def test_efficiency_while_dirty_launches_arm64_nodes(
    cluster: WorkloadCluster, dirty: Dirty
) -> None:
    hosts = eventually(lambda: running_on(cluster, "arm"), 90.0, "the pods running")
    assert {node_labels(n)[POOL_LABEL] for n in hosts} == {"efficient"}
    assert {node_labels(n)["kubernetes.io/arch"] for n in hosts} == {"arm64"}
    claims = items(cluster, "nodeclaims", "-l", f"{POOL_LABEL}=efficient")
    assert claims
    assert {c["metadata"]["labels"]["kubernetes.io/arch"] for c in claims} == {"arm64"}
    requirement = {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}
    assert requirement in dirty.created["efficient"]["spec"]["template"]["spec"]["requirements"]


def test_pause_while_dirty_launches_nothing_until_carbonshift_resumes_the_pool(
    cluster: WorkloadCluster, dirty: Dirty, clean: Clean
) -> None:
    assert clean.held_for >= HOLD
    assert clean.paused_claims == [], "Karpenter launched for the paused pool while dirty"
    assert clean.paused_pending, "the paused pool's pods did not stay Pending"
    assert clean.limited, "Karpenter did not name the paused pool's limits as the reason"
    assert dirty.created["paused"]["spec"]["limits"] == {"cpu": "0"}
    resumed = eventually(
        lambda: (p := get(cluster, "nodepools", "paused"))["spec"]["limits"]["cpu"] != "0" and p,
        30.0,
        "carbonshift resuming the pool",
    )
    assert resumed["spec"]["limits"] == {"cpu": "100"}
    assert eventually(lambda: events(cluster, "paused", "NodePoolResumed"), 10.0, "the Event")
    hosts = eventually(lambda: running_on(cluster, "hold"), 90.0, "the held pods running")
    assert {node_labels(n)[POOL_LABEL] for n in hosts} == {"paused"}
    assert dirty.claims.of("paused")


def test_intensity_label_is_on_the_nodes_and_green_only_pods_land_on_low_nodes(
    cluster: WorkloadCluster, dirty: Dirty, clean: Clean
) -> None:
    dirty_nodes = eventually(lambda: running_on(cluster, "arm"), 30.0, "the efficiency nodes")
    assert {node_labels(n).get(INTENSITY_CLASS) for n in dirty_nodes} == {"high"}
    assert clean.low_pending, "the green-only pod found capacity while only high pools existed"
    assert node_class_label(get(cluster, "nodepools", "green")) == "low"
    (host,) = eventually(lambda: running_on(cluster, "green-only"), 90.0, "the green-only pod")
    assert node_labels(host).get(INTENSITY_CLASS) == "low"
    assert node_labels(host)[POOL_LABEL] == "green"
    low = items(cluster, "nodes", "-l", f"{INTENSITY_CLASS}=low")
    assert {node_labels(n)[POOL_LABEL] for n in low} == {"green"}


def test_weight_karpenter_chooses_the_pool_carbonshift_weighted_greener(
    cluster: WorkloadCluster, dirty: Dirty, clean: Clean
) -> None:
    (plain,) = clean.plain_hosts
    assert node_labels(get(cluster, "nodes", plain))[POOL_LABEL] == "plain"
    assert dirty.created["weighted"]["spec"]["weight"] == 30  # DE 700 g: greenness 30 < 50
    eventually(
        lambda: get(cluster, "nodepools", "weighted")["spec"].get("weight") == 90,
        30.0,
        "the weight following the clean grid",
    )
    cluster.apply(pods("clean-weight", 1, {GROUP: "weight"}, cpu="1500m"))
    (host,) = eventually(lambda: running_on(cluster, "clean-weight"), 90.0, "the clean-weight pod")
    assert node_labels(host)[POOL_LABEL] == "weighted"
    assert DECISION in get(cluster, "nodepools", "weighted")["metadata"]["annotations"]


def test_without_the_leader_a_refresh_lifts_a_pause_now(
    cluster: WorkloadCluster, grid: Grid, dirty: Dirty, clean: Clean
) -> None:
    """Runs last: it turns the grid dirty again and takes the leadership away."""
    grid.values["DE"] = DIRTY
    eventually(lambda: local_intensity(cluster) == DIRTY, 20.0, "carbonshift reading DE dirty")
    cluster.apply([nodepool("refreshed", "pause")])
    assert get(cluster, "nodepools", "refreshed")["spec"]["limits"] == {"cpu": "0"}
    cluster.apply(pods("refresh", 1, {POOL_LABEL: "refreshed"}))
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    lease = {"holderIdentity": "e2e", "leaseDurationSeconds": 3600, "acquireTime": now,
             "renewTime": now}  # fmt: skip
    cluster.kubectl("patch", "lease", "carbonshift-leader", "-n", "default", "--type=merge",
                    "-p", json.dumps({"spec": lease}))  # fmt: skip
    eventually(lambda: metric(cluster, "carbonshift_leader") == 0, 20.0, "carbonshift not leading")
    grid.values["DE"] = CLEAN
    eventually(lambda: local_intensity(cluster) == CLEAN, 20.0, "carbonshift reading DE clean")
    more_passes(lambda: refreshes(cluster), 3)  # a leader would have re-evaluated by now
    assert get(cluster, "nodepools", "refreshed")["spec"]["limits"] == {"cpu": "0"}
    assert dirty.claims.of("refreshed") == []
    cluster.kubectl("annotate", "nodepools", "refreshed", f"{REFRESH}=1")
    hosts = eventually(lambda: running_on(cluster, "refresh"), 90.0, "the pod running")
    assert {node_labels(n)[POOL_LABEL] for n in hosts} == {"refreshed"}
    assert get(cluster, "nodepools", "refreshed")["spec"]["limits"] == {"cpu": "100"}
