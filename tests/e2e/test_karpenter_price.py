"""Strategy ``price`` (the NodePool default) with the real Karpenter: the carbon price
NodeOverlays carbonshift's leader keeps are what Karpenter uses, and consolidation follows
them; the ladder steps limits down and back; pools that exclude arm64 stay satisfiable; the
local grid comes from the cluster's own Nodes.

One workload cluster (``devtools.sandbox.workload``: Karpenter v1.14.1, kwok provider,
feature gate ``NodeOverlay`` on) with **no zone in carbonshift's config**, and kwok's
instance types replaced by :data:`TYPES`: 1, 2 and 4 vCPU types in amd64 and arm64 whose
raw on-demand prices differ by :data:`GAP` per vCPU, amd64 cheaper. Why: kwok launches the
raw-cheapest type (amd64) whatever the overlays say, and consolidation replaces a node only
by a strictly cheaper one at overlaid prices. The carbon price of one vCPU-hour differs
between the two by (2.12 - 1.08) W x intensity x $190/t: $0.0000059 at 30 g/kWh (clean:
below the gap, nothing moves), $0.000059 at 300 (medium: still below) and $0.000138 at
700 g/kWh (dirty: above, the arm64 type becomes the cheaper one and Karpenter moves to it).

In order: (e) with no Node naming a region the pools are left alone (``CarbonZoneUnknown``
Event, no overlay); a Node saying ``aws``/``eu-north-1`` makes the zone SE-SE3. (a) the
overlays are Ready and the NodeClaim Karpenter launches is annotated
``karpenter.sh/price-overlay-applied``. (b) clean: the amd64 node stays; dirty: Karpenter
replaces it with arm64. (c) the ladder pool's limits step 100 -> 50 -> 0 and back, byte for
byte. (d) pools requiring amd64, admitted while dirty under every strategy, keep allowing
it, and one of them launches. A user's own overlay is never touched, and the conflict of
one at carbonshift's weight is a ``CarbonPriceNotApplied`` Event; opting out removes
carbonshift's overlays, not the user's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from e2e_support import PASSES, more_passes
from test_fleet_labels import eventually
from test_karpenter import (
    NAMESPACE,
    events,
    get,
    items,
    metric,
    nodepool,
    ready,
    workload_cluster,
)
from test_reevaluate_policies import Grid

from devtools.sandbox.workload import WorkloadCluster
from webhook.model.vocabulary import DECISION

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

ZONE = "SE-SE3"
CLEAN, MEDIUM, DIRTY = 30.0, 300.0, 700.0
GAP = 0.0001
"""Raw on-demand price difference per vCPU-hour, arm64 above amd64 (US dollars)."""
OVERLAYS = "nodeoverlays.karpenter.sh"
MINE = "carbonshift.io/overlay=price"
APPLIED = "karpenter.sh/price-overlay-applied"
ARCH = "kubernetes.io/arch"
POOL = "karpenter.sh/nodepool"
LIMITS = {"cpu": "100", "memory": "400Gi"}
"""The ladder pool's own limits (restored exactly)."""
STRATEGIES = ("price", "efficiency", "zones", "weight", "pause", "ladder")


def instance_type(cpu: int, arch: str) -> dict[str, Any]:
    """One kwok instance type (``kwok/cloudprovider/instance_types.json``'s shape)."""
    price = 0.025 * cpu + 0.002 * cpu + (GAP * cpu if arch == "arm64" else 0.0)
    offering = {
        "Price": price,
        "Available": True,
        "Requirements": [
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["test-zone-a"]},
        ],
    }
    return {
        "name": f"c-{cpu}x-{arch}-linux",
        "offerings": [offering],
        "architecture": arch,
        "operatingSystems": ["linux"],
        "resources": {
            "cpu": str(cpu),
            "memory": f"{2 * cpu}Gi",
            "ephemeral-storage": "20Gi",
            "pods": str(16 * cpu),
        },
    }


TYPES = [instance_type(cpu, arch) for cpu in (1, 2, 4) for arch in ("amd64", "arm64")]


def pool(name: str, strategy: str, *, arch: list[str] | None = None) -> dict[str, Any]:
    """An opted-in kwok NodePool (``strategy`` "": none set, so ``price``) that
    consolidates at once when a cheaper node would do."""
    body = nodepool(name, strategy)
    spec = body["spec"]
    spec["disruption"] = {"consolidationPolicy": "WhenEmptyOrUnderutilized",
                          "consolidateAfter": "0s"}  # fmt: skip
    if arch is not None:
        spec["template"]["spec"]["requirements"].append(
            {"key": ARCH, "operator": "In", "values": arch}
        )
    return body


def deployment(name: str, selector: dict[str, str], cpu: str) -> dict[str, Any]:
    labels = {"app": name}
    container = {
        "name": "app",
        "image": "registry.k8s.io/pause:3.10",  # never pulled: KWOK plays the kubelet
        "resources": {"requests": {"cpu": cpu, "memory": "128Mi"}},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"nodeSelector": selector, "containers": [container]},
            },
        },
    }


def aws_node() -> dict[str, Any]:
    """A Node as an EKS node says where it is (tainted: nothing lands on it)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "ip-10-0-0-1.eu-north-1.compute.internal",
            "labels": {"topology.kubernetes.io/region": "eu-north-1"},
        },
        "spec": {
            "providerID": "aws:///eu-north-1a/i-0123456789abcdef0",
            "taints": [{"key": "e2e.carbonshift.io/foreign", "effect": "NoSchedule"}],
        },
    }


# --------------------------------------------------------------------- reading the cluster


def overlays(cluster: WorkloadCluster) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in items(cluster, OVERLAYS, "-l", MINE)}


def priced_at(cluster: WorkloadCluster, intensity: float) -> dict[str, dict[str, Any]] | None:
    """carbonshift's overlays once all are priced at ``intensity`` of SE-SE3."""
    found = overlays(cluster)
    notes = [o["metadata"].get("annotations") or {} for o in found.values()]
    wanted = {"carbonshift.io/intensity-zone": ZONE,
              "carbonshift.io/intensity-value": f"{intensity:g}"}  # fmt: skip
    if len(found) == 6 and all(n.items() >= wanted.items() for n in notes):
        return found
    return None


def host(cluster: WorkloadCluster, app: str) -> dict[str, Any] | None:
    """The Ready node the app's one pod runs on (None until then)."""
    running = [
        p
        for p in items(cluster, "pods", "-n", NAMESPACE, "-l", f"app={app}")
        if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
    ]
    if len(running) != 1:
        return None
    node = {n["metadata"]["name"]: n for n in items(cluster, "nodes")}.get(
        running[0]["spec"].get("nodeName", "")
    )
    return node if node is not None and ready(node) else None


def claims(cluster: WorkloadCluster, name: str) -> list[dict[str, Any]]:
    return items(cluster, "nodeclaims.karpenter.sh", "-l", f"{POOL}={name}")


# --------------------------------------------------------------------- the cluster


@pytest.fixture(scope="module")
def grid() -> Iterator[Grid]:
    with Grid() as running:
        running.values[ZONE] = CLEAN
        yield running


@pytest.fixture(scope="module")
def cluster(grid: Grid, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkloadCluster]:
    state = tmp_path_factory.mktemp("karpenter-price")
    types = state / "instance-types.json"
    types.write_text(json.dumps(TYPES))
    config = {
        "zone": None,  # the zone comes from the Nodes
        "nodepools": {"price": {"vcpus": [1, 2, 4], "min_interval_seconds": 3}},
    }
    with workload_cluster(grid, state, config, types) as workload:
        workload.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}])
        yield workload


def set_grid(grid: Grid, intensity: float) -> None:
    grid.values[ZONE] = intensity


# --------------------------------------------------------------------- the tests


def test_e_no_known_zone_leaves_pools_alone_then_the_nodes_name_it(
    cluster: WorkloadCluster,
) -> None:
    cluster.apply([pool("priced", "")])
    told = eventually(
        lambda: events(cluster, "priced", "CarbonZoneUnknown"), 30.0, "CarbonZoneUnknown"
    )
    assert "carbonshift.io/grid-zone" in told[0]["note"]
    assert overlays(cluster) == {}
    cluster.apply([aws_node()])
    # NodeZones lists the Nodes again within 10 s while the zone is unknown.
    found = eventually(lambda: priced_at(cluster, CLEAN), 60.0, "overlays priced for SE-SE3")
    # Admission decides a pool once the zone is known (one created before is decided on
    # its next carbonshift.io/refresh; the price needs no decision of the pool).
    ladder = pool("ladder", "ladder")
    ladder["spec"]["limits"] = dict(LIMITS)
    cluster.apply([ladder])
    assert sorted(found) == [f"carbonshift-price-{a}-{n}" for a in ("amd64", "arm64")
                             for n in (1, 2, 4)]  # fmt: skip


def test_a_the_overlays_are_what_karpenter_uses(cluster: WorkloadCluster) -> None:
    def all_ready() -> bool:
        found = overlays(cluster).values()
        return len(found) == 6 and all(
            any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in (o.get("status") or {}).get("conditions") or []
            )
            for o in found
        )

    eventually(all_ready, 60.0, "NodeOverlays Ready")
    cluster.apply([deployment("priced-app", {POOL: "priced"}, "1500m")])
    node = eventually(lambda: host(cluster, "priced-app"), 120.0, "the priced pool's node")
    assert node["metadata"]["labels"][ARCH] == "amd64", "kwok launches the raw-cheapest"
    (claim,) = claims(cluster, "priced")
    assert claim["metadata"]["annotations"].get(APPLIED) == "true", claim["metadata"]


def test_b_c_clean_leaves_nodes_alone_medium_steps_the_ladder(
    cluster: WorkloadCluster, grid: Grid
) -> None:
    first = {c["metadata"]["name"] for c in claims(cluster, "priced")}
    time.sleep(25)  # Karpenter has looked for a cheaper node several times by now
    assert {c["metadata"]["name"] for c in claims(cluster, "priced")} == first
    node = host(cluster, "priced-app")
    assert node is not None
    assert node["metadata"]["labels"][ARCH] == "amd64"
    assert get(cluster, "nodepools", "ladder")["spec"]["limits"] == LIMITS

    set_grid(grid, MEDIUM)
    eventually(
        lambda: get(cluster, "nodepools", "ladder")["spec"]["limits"].get("cpu") == "50",
        60.0,
        "the ladder at half the limit",
    )
    eventually(lambda: priced_at(cluster, MEDIUM), 60.0, "overlays priced at 300 g/kWh")


def test_b_d_dirty_moves_to_the_efficient_type_and_amd64_pools_stay_satisfiable(
    cluster: WorkloadCluster, grid: Grid
) -> None:
    set_grid(grid, DIRTY)
    eventually(lambda: priced_at(cluster, DIRTY), 60.0, "overlays priced at 700 g/kWh")
    amd = [pool(f"amd-{s}", s, arch=["amd64"]) for s in STRATEGIES]
    cluster.apply(amd)
    for body in amd:
        stored = get(cluster, "nodepools", body["metadata"]["name"])
        wants = [r for r in stored["spec"]["template"]["spec"]["requirements"] if r["key"] == ARCH]
        assert wants, stored["metadata"]["name"]
        assert all("amd64" in r.get("values", []) for r in wants), (stored["metadata"], wants)
    cluster.apply([deployment("amd-app", {POOL: "amd-price"}, "500m")])

    moved = eventually(
        lambda: (n := host(cluster, "priced-app")) and n["metadata"]["labels"][ARCH] == "arm64",
        240.0,
        "Karpenter consolidating the priced pool onto arm64",
    )
    assert moved
    changed = events(cluster, "priced", "CarbonPriceChanged")
    assert any("700 g/kWh" in e["note"] for e in changed), changed
    node = eventually(lambda: host(cluster, "amd-app"), 120.0, "the amd64-only pool's node")
    assert node["metadata"]["labels"][ARCH] == "amd64"
    eventually(
        lambda: get(cluster, "nodepools", "ladder")["spec"]["limits"].get("cpu") == "0",
        60.0,
        "the ladder at its last step",
    )
    efficiency = get(cluster, "nodepools", "amd-efficiency")["metadata"]["annotations"]
    left = json.loads(efficiency[DECISION]).get("left") or []
    assert any(x.get("rule") == "efficiency" for x in left), efficiency[DECISION]


def test_c_clean_again_restores_the_ladder_byte_for_byte(
    cluster: WorkloadCluster, grid: Grid
) -> None:
    set_grid(grid, CLEAN)
    eventually(
        lambda: get(cluster, "nodepools", "ladder")["spec"]["limits"] == LIMITS,
        60.0,
        "the ladder pool's own limits back",
    )
    stored = get(cluster, "nodepools", "ladder")
    assert json.dumps(stored["spec"]["limits"], sort_keys=True) == json.dumps(
        LIMITS, sort_keys=True
    )


def user_overlay() -> dict[str, Any]:
    """A user's own price overlay on arm64, at carbonshift's weight: NodeOverlay orders
    equal weights by name, later names first, so this one wins and carbonshift's arm64
    overlays conflict with it."""
    return {
        "apiVersion": "karpenter.sh/v1alpha1",
        "kind": "NodeOverlay",
        "metadata": {"name": "zz-user-arm64"},
        "spec": {
            "weight": 1,
            "requirements": [{"key": ARCH, "operator": "In", "values": ["arm64"]}],
            "priceAdjustment": "+10%",
        },
    }


def test_a_users_overlay_is_never_touched_and_a_conflict_is_told(
    cluster: WorkloadCluster,
) -> None:
    cluster.apply([user_overlay()])
    before = get(cluster, OVERLAYS, "zz-user-arm64")
    told = eventually(
        lambda: events(cluster, "priced", "CarbonPriceNotApplied"), 90.0, "the conflict told"
    )
    assert "Conflict" in told[0]["note"], told
    more_passes(lambda: metric(cluster, PASSES), 3)  # more passes of the leader
    after = get(cluster, OVERLAYS, "zz-user-arm64")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert after["spec"] == user_overlay()["spec"]


def test_opting_out_removes_the_overlays(cluster: WorkloadCluster) -> None:
    body = get(cluster, "nodepools", "priced")
    body["metadata"]["labels"]["carbonshift.io/enabled"] = "false"
    amd = get(cluster, "nodepools", "amd-price")
    amd["metadata"]["labels"]["carbonshift.io/enabled"] = "false"
    cluster.apply([body, amd])
    eventually(lambda: overlays(cluster) == {}, 60.0, "no carbonshift overlay left")
    assert get(cluster, OVERLAYS, "zz-user-arm64")["spec"] == user_overlay()["spec"]
