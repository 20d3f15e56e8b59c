"""Liqo against the real thing: Liqo v1.0.1's virtual kubelet (``hack/build-liqo.sh``, from
the pinned module) peers the sandbox's API server with two member clusters' API servers,
networking disabled: each runs as Liqo runs it (a ForeignCluster with the networking
module off, a VirtualNode with the provider's cluster labels, the remote kubeconfig in a
Secret of the tenant namespace), creates its virtual node and reflects the pods bound to
it into its remote cluster (as ShadowPods: the provider's Liqo controller, which turns
them into pods, is not part of this test).

member-se declares ``carbonshift.io/zone: SE-SE3`` in its cluster labels; member-pl only
``liqo.io/provider: gke`` and ``topology.kubernetes.io/region: europe-central2`` (PL through
the region table). A local Node in France (eu-west-3, ~99 g) is a third candidate: greener
than member-pl, dirtier than member-se, and the one kube-scheduler picks when virtual
nodes are read as plain Nodes (member-se's declared zone unread).
The real kube-scheduler calls carbonshift as its extender (``test_schedulers``' fixture),
and the sandbox's webhook mutates a NamespaceOffloading applied through the API server.
A replica of its own, fed by a fake Electricity Maps whose values the test flips, labels
the virtual nodes and re-evaluates the NamespaceOffloading.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e_support import Kube, eventually, unavailable, unique
from test_reevaluate_policies import Grid, events, follower
from test_schedulers import binary, kube_scheduler, start

from devtools.sandbox import Component, Sandbox, free_port
from webhook.decision.ranking import greenness
from webhook.decision.record import Record
from webhook.model.vocabulary import DECISION
from webhook.providers.static import annual_table

__all__ = ["kube_scheduler"]  # the module fixture, started for this module too

pytestmark = pytest.mark.timeout(600)

LOOPBACK = "127.0.0.1"
CRDS = (
    "core.liqo.io_foreignclusters.yaml",
    "offloading.liqo.io_virtualnodes.yaml",
    "offloading.liqo.io_namespacemaps.yaml",
    "offloading.liqo.io_namespaceoffloadings.yaml",
)
"""What the virtual kubelet reads at home (and the NamespaceOffloading the webhook decides)."""
SHADOW_PODS = "offloading.liqo.io_shadowpods.yaml"
"""What it writes in the remote cluster."""
TAINT = "virtual-node.liqo.io/not-allowed"
RESOURCES = {"cpu": "8", "memory": "32Gi", "pods": "110"}
PAUSE = "registry.k8s.io/pause:3.10"
ID = "liqo.io/remote-cluster-id"
CLASS = "carbonshift.io/intensity"
NSO = "namespaceoffloadings.offloading.liqo.io"
PEERS = {
    "member-se": {"carbonshift.io/zone": "SE-SE3"},
    "member-pl": {"liqo.io/provider": "gke", "topology.kubernetes.io/region": "europe-central2"},
}


def crd(sandbox: Sandbox, name: str) -> str:
    path = sandbox.layout.crd("liqo", name)
    return str(path)


def virtual_kubelet(sandbox: Sandbox) -> str:
    """hack/build-liqo.sh (cached by its stamp); the binary's path."""
    lay = sandbox.layout
    log = lay.state / "build-liqo.log"
    env = {**os.environ, "CARBONSHIFT_CACHE": str(lay.bin)}
    with log.open("w") as out:
        done = subprocess.run(
            [str(lay.root / "hack" / "build-liqo.sh")],
            stdout=out, stderr=subprocess.STDOUT, env=env, check=False, timeout=1800,
        )  # fmt: skip
    if done.returncode != 0:
        unavailable("hack/build-liqo.sh failed:\n" + "\n".join(log.read_text().splitlines()[-20:]))
    return binary(sandbox, "liqo-virtual-kubelet")


def peer(kube: Kube, sandbox: Sandbox, vk: str, member: str, pool: str) -> str:
    """Peer with ``member`` as Liqo does, without networking; the virtual node's name."""
    lay = sandbox.layout
    tenant, node = f"liqo-tenant-{member}", f"liqo-{member}"
    labels = {**PEERS[member], "e2e-pool": pool}
    remote = lay.member_kubeconfig(member).read_bytes()
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": tenant}})
    kube.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": "remote-kubeconfig", "namespace": tenant,
    }, "data": {"kubeconfig": base64.b64encode(remote).decode()}})  # fmt: skip
    kube.apply({"apiVersion": "core.liqo.io/v1beta1", "kind": "ForeignCluster", "metadata": {
        "name": member, "labels": {ID: member},
    }, "spec": {"clusterID": member}})  # fmt: skip
    kube.ok("patch", "foreignclusters.core.liqo.io", member, "--subresource=status",
            "--type=merge", "-p", json.dumps({"status": {"modules": {
                "networking": {"enabled": False}, "authentication": {"enabled": True},
                "offloading": {"enabled": True}}}}))  # fmt: skip
    kube.apply({"apiVersion": "offloading.liqo.io/v1beta1", "kind": "VirtualNode", "metadata": {
        "name": node, "namespace": tenant,
    }, "spec": {"clusterID": member, "createNode": True, "labels": labels,
                "resourceQuota": {"hard": RESOURCES}}})  # fmt: skip
    port, metrics = free_port(), free_port()
    extra = ",".join(f"{k}={v}" for k, v in labels.items())
    component = Component(
        f"liqo-vk-{member}",
        [
            vk, f"--home-kubeconfig={lay.kubeconfig}", "--home-cluster-id=sandbox",
            f"--foreign-cluster-id={member}", "--foreign-kubeconfig-secret-name=remote-kubeconfig",
            f"--tenant-namespace={tenant}", "--liqo-namespace=liqo", f"--nodename={node}",
            f"--node-ip={LOOPBACK}", f"--listen-port={port}", "--certificate-type=self-signed",
            "--metrics-enabled", f"--metrics-address={LOOPBACK}:{metrics}",
            "--node-check-network=false", "--disable-ip-reflection",
            f"--node-extra-labels={extra}",
        ],
        f"http://{LOOPBACK}:{metrics}/metrics",
        env={"VIRTUALNODE_NAME": node, "POD_NAMESPACE": tenant, "POD_NAME": f"vk-{member}"},
    )  # fmt: skip
    start(sandbox, component)
    return node


def ready(kube: Kube, node: str) -> dict[str, Any] | None:
    """The Node once its virtual kubelet reports it Ready (None until then)."""
    found = kube.run("get", "node", node, "-o", "json")
    if found.returncode != 0:
        return None
    obj: dict[str, Any] = json.loads(found.stdout)
    conditions = obj.get("status", {}).get("conditions") or []
    is_ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
    return obj if is_ready else None


def local_node(kube: Kube, pool: str) -> str:
    """A local Node in Germany, Ready (no kubelet: its status is set once)."""
    name = unique("local-de")
    kube.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
        "kubernetes.io/hostname": name, "e2e-pool": pool,
        "topology.kubernetes.io/region": "eu-central-1",
    }}})  # fmt: skip
    ready = [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]
    status = {"capacity": RESOURCES, "allocatable": RESOURCES, "conditions": ready}
    kube.ok("patch", "node", name, "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": status}))  # fmt: skip
    return name


def untaint(kube: Kube, node: str) -> None:
    """Lift the ``not-ready`` taint every new Node gets (no node lifecycle controller runs
    on the sandbox's API server); a virtual node keeps Liqo's own."""
    taints = kube.get("node", node)["spec"].get("taints") or []
    kept = [t for t in taints if t["key"] == TAINT]
    kube.ok("patch", "node", node, "--type=merge", "-p", json.dumps({"spec": {"taints": kept}}))


@pytest.fixture(scope="module")
def liqo(kube_scheduler: Sandbox) -> Iterator[dict[str, str]]:
    """Two virtual nodes (member-se, member-pl) run by Liqo's virtual kubelet and a local
    Node in Germany, all in one pool; yields the pool label and the node names."""
    sandbox = kube_scheduler
    kube = Kube(sandbox)
    vk = virtual_kubelet(sandbox)
    args = ["apply", "--server-side", "--force-conflicts"]
    kube.ok(*args, *(f"-f={crd(sandbox, n)}" for n in CRDS))
    names = [f"{n.removesuffix('.yaml').split('_')[1]}.{n.split('_')[0]}" for n in CRDS]
    sandbox.wait_established(*names)  # not kubectl wait: it errs on a CRD without conditions yet
    for member in PEERS:
        kube.on(member).ok(*args, f"-f={crd(sandbox, SHADOW_PODS)}")
    pool = unique("liqo-pool")
    nodes: dict[str, str] = {}
    try:
        nodes = {member: peer(kube, sandbox, vk, member, pool) for member in PEERS}
        for node in nodes.values():
            eventually(lambda n=node: ready(kube, n), f"virtual node {node} Ready", timeout=60)  # type: ignore[misc]
            untaint(kube, node)
        nodes["local"] = local_node(kube, pool)
        untaint(kube, nodes["local"])
        yield {"pool": pool, **nodes}
    finally:
        for member in PEERS:
            sandbox.stop(f"liqo-vk-{member}")
        for node in nodes.values():
            kube.run("delete", "node", node, "--wait=false")


def offload(kube: Kube, namespace: str, liqo: dict[str, str]) -> dict[str, str]:
    """Map ``namespace`` to a namespace of each remote cluster, as Liqo's controllers would
    (NamespaceMap with its status); the remote namespace names."""
    remote = {}
    for member in PEERS:
        remote[member] = f"{namespace}-sandbox"
        kube.on(member).apply({"apiVersion": "v1", "kind": "Namespace",
                               "metadata": {"name": remote[member]}})  # fmt: skip
        tenant = f"liqo-tenant-{member}"
        kube.apply({"apiVersion": "offloading.liqo.io/v1beta1", "kind": "NamespaceMap",
                    "metadata": {"name": f"{member}-{namespace}", "namespace": tenant,
                                 "labels": {ID: member}},
                    "spec": {"desiredMapping": {namespace: remote[member]}}})  # fmt: skip
        status = {"currentMapping": {namespace: {"phase": "Accepted",
                                                 "remoteNamespace": remote[member]}}}  # fmt: skip
        kube.ok("patch", "namespacemaps.offloading.liqo.io", f"{member}-{namespace}", "-n",
                tenant, "--subresource=status", "--type=merge", "-p",
                json.dumps({"status": status}))  # fmt: skip
    return remote


def pod(kube: Kube, namespace: str, pool: str) -> str:
    """A pending Pod for the pool, tolerating virtual nodes as Liqo's pod webhook makes it."""
    name = unique("pod")
    container = {"name": "app", "image": PAUSE, "resources": {"requests": {"cpu": "100m"}}}
    tolerate = {"key": TAINT, "operator": "Exists", "effect": "NoExecute"}
    spec = {"nodeSelector": {"e2e-pool": pool}, "tolerations": [tolerate],
            "containers": [container]}  # fmt: skip
    kube.apply({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": namespace}, "spec": spec})  # fmt: skip
    return name


def test_a_pod_lands_on_the_greener_peer_and_is_reflected_there(
    kube: Kube, liqo: dict[str, str]
) -> None:
    namespace = kube.namespace(enabled=False)
    remote = offload(kube, namespace, liqo)
    name = pod(kube, namespace, liqo["pool"])

    def bound() -> str | None:
        return kube.get("pod", name, namespace)["spec"].get("nodeName") or None

    # Candidates, scored by the extender on the embedded table: liqo-member-se (SE-SE3,
    # declared by the peer), the local node (DE, by its region) and liqo-member-pl (PL, by
    # its region), the first greener than the other two by whole extender points.
    table = annual_table()
    scores = {z: (greenness(table[z].value) + 5) // 10 for z in ("SE-SE3", "DE", "PL")}
    assert scores["SE-SE3"] > scores["DE"] + 1 > scores["PL"], scores  # 10, 7, 4
    assert eventually(bound, f"pod {name} bound") == liqo["member-se"]
    se = kube.on("member-se")
    shadow = eventually(
        lambda: se.find("shadowpods.offloading.liqo.io", name, remote["member-se"]),
        "the pod reflected into member-se",
    )
    assert shadow["spec"]["pod"]["containers"][0]["image"] == PAUSE
    assert kube.on("member-pl").find("shadowpods.offloading.liqo.io", name,
                                     remote["member-pl"]) is None  # fmt: skip


def namespace_offloading(pool: str) -> dict[str, Any]:
    """Offload to the pool's remote clusters only (a user term carbonshift must keep)."""
    term = {"matchExpressions": [{"key": "e2e-pool", "operator": "In", "values": [pool]}]}
    return {
        "apiVersion": "offloading.liqo.io/v1beta1", "kind": "NamespaceOffloading",
        "metadata": {"name": "offloading"},
        "spec": {"podOffloadingStrategy": "Remote", "namespaceMappingStrategy": "DefaultName",
                 "clusterSelector": {"nodeSelectorTerms": [term]}},
    }  # fmt: skip


def remote_ids(obj: dict[str, Any]) -> list[list[str]]:
    """Per term of the stored clusterSelector: the remote cluster ids it is narrowed to."""
    terms = obj["spec"]["clusterSelector"]["nodeSelectorTerms"]
    return [[v for e in t["matchExpressions"] if e["key"] == ID for v in e["values"]]
            for t in terms]  # fmt: skip


def test_a_namespace_offloading_is_narrowed_to_the_greener_peer_then_follows_the_grid(
    kube: Kube, liqo: dict[str, str], tmp_path: Path
) -> None:
    namespace = kube.namespace(enabled=True)
    wanted = namespace_offloading(liqo["pool"])
    stored = kube.apply_json({**wanted, "metadata": {"name": "offloading", "namespace": namespace}})
    # The sandbox's webhook (static data: SE-SE3 greener than PL) keeps the user's term and
    # narrows it to member-se; the API server validated the result against Liqo's CRD.
    user_term = wanted["spec"]["clusterSelector"]["nodeSelectorTerms"][0]["matchExpressions"][0]
    assert stored["spec"]["clusterSelector"]["nodeSelectorTerms"][0]["matchExpressions"][0] == (
        user_term
    )
    assert remote_ids(stored) == [["member-se"]]
    record = Record.decode(stored["metadata"]["annotations"][DECISION])
    assert {n: c["w"] for n, c in record.body["clusters"].items()} == {
        "member-pl": 0, "member-se": 1,
    }  # fmt: skip
    kube.ok("apply", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump(stored))
    # The user's own file applied again, as kubectl and as Flux apply it (each in a
    # namespace of its own): nothing new stored, and kubectl diff shows nothing.
    flux = ("--server-side", "--force-conflicts", "--field-manager=kustomize-controller")
    for how, where in (((), namespace), (flux, kube.namespace(enabled=True))):
        file = yaml.safe_dump({**wanted, "metadata": {"name": "offloading", "namespace": where}})
        kube.ok("apply", *how, "-f", "-", stdin=file)
        first = kube.get(NSO, "offloading", where)
        assert remote_ids(first) == [["member-se"]]
        kube.ok("apply", *how, "-f", "-", stdin=file)
        again = kube.get(NSO, "offloading", where)
        assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"], how
        shown = kube.run("diff", *how, "-f", "-", stdin=file)
        assert shown.returncode == 0, f"kubectl diff {how}: {shown.stdout}{shown.stderr}"

    se, pl = liqo["member-se"], liqo["member-pl"]
    labels = {"enabled": True, "min_interval_seconds": 0, "interval_seconds": 1}
    with Grid() as grid, follower(kube.sandbox, tmp_path, grid, "none", {"labels": labels}):

        def classes() -> tuple[str, str] | None:
            found = (kube.get("node", se)["metadata"]["labels"].get(CLASS),
                     kube.get("node", pl)["metadata"]["labels"].get(CLASS))  # fmt: skip
            return found if None not in found else None

        assert eventually(classes, "class labels on the virtual nodes") == ("low", "high")
        grid.values.update({"SE-SE3": 900.0, "PL": 30.0})

        def flipped() -> tuple[str, str] | None:
            found = classes()
            return found if found == ("high", "low") else None

        eventually(flipped, "the class labels to follow the grid", timeout=60)

        def followed() -> dict[str, Any] | None:
            obj = kube.get(NSO, "offloading", namespace)
            return obj if remote_ids(obj) == [["member-pl"]] else None

        moved = eventually(followed, "the clusterSelector to follow the grid", timeout=60)
    terms = moved["spec"]["clusterSelector"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"][0] == user_term  # still the user's, still narrowed
    assert events(kube, "default", pl, "IntensityClassChanged")
    kube.ok("apply", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump(moved))
