"""Karmada members that are real clusters: member-se, member-fr and member-pl each run
their own etcd, kube-apiserver and kube-controller-manager, joined in Push mode with a
ServiceAccount token. karmada-controller-manager finds them Ready (nobody writes a
Cluster's status by hand), and a Deployment propagated by a carbon-weighted policy
lands on the members' API servers in the proportions carbonshift wrote, its pods Running
on each member's KWOK Node.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import pytest
import yaml
from e2e_support import (
    DEMO,
    WEIGHTED,
    Kube,
    MemberKube,
    carbon_order,
    eventually,
    no_binding_terminating,
    propagation_policy,
    unique,
    wait_rooms,
    weights,
)
from test_schedulers import REPLICAS, deployment

from devtools.sandbox import Layout, Sandbox
from devtools.sandbox.processes import pid_alive, read_pid

pytestmark = pytest.mark.timeout(600)

CLUSTERS = "cluster.cluster.karmada.io"
BINDINGS = "resourcebindings.work.karmada.io"
MAX_CLUSTERS = "carbonshift.io/max-clusters"
GREENEST = DEMO[0]


def webster(weighting: Mapping[str, int], seats: int) -> dict[str, int]:
    """Karmada's division of static weights (Sainte-Laguë), clusters with no seat left
    out (this weighting has no ties)."""
    got = dict.fromkeys(weighting, 0)
    for _ in range(seats):
        best = max(weighting, key=lambda c: weighting[c] / (2 * got[c] + 1))
        got[best] += 1
    return {c: n for c, n in got.items() if n}


def on_members(kube: Kube, namespace: str, name: str) -> dict[str, int]:
    """Member -> ``spec.replicas`` of the Deployment in that member's own API server."""
    found = {}
    for member in DEMO:
        obj = kube.on(member).find("deployment", name, namespace)
        if obj is not None:
            found[member] = obj["spec"]["replicas"]
    return found


def landed(kube: Kube, namespace: str, name: str) -> dict[str, int]:
    """Wait until Karmada has scheduled and applied the Deployment and the members hold
    exactly what the ResourceBinding says; returns member -> replicas."""

    def settled() -> dict[str, int] | None:
        result = kube.run("get", BINDINGS, f"{name}-deployment", "-n", namespace, "-o", "json")
        if result.returncode != 0:
            return None
        binding = json.loads(result.stdout)
        conditions = {
            c["type"]: c["status"] for c in binding.get("status", {}).get("conditions", [])
        }
        if conditions.get("Scheduled") != "True" or conditions.get("FullyApplied") != "True":
            return None
        wanted = {c["name"]: c["replicas"] for c in binding["spec"].get("clusters") or []}
        got = on_members(kube, namespace, name)
        return got if got == wanted else None

    return eventually(settled, f"{namespace}/{name} on the members", timeout=90.0)


def replica_sets(member: MemberKube, namespace: str, name: str) -> list[int]:
    """``spec.replicas`` of the member's ReplicaSets of the Deployment (its own
    kube-controller-manager made them)."""
    out = member.ok("get", "replicasets", "-n", namespace, "-l", f"app={name}", "-o", "json")
    return [rs["spec"]["replicas"] for rs in json.loads(out)["items"]]


def test_members_are_ready_by_karmadas_own_status_collection(sandbox: Sandbox, kube: Kube) -> None:
    for member in DEMO:
        cluster = json.loads(
            kube.ok("get", CLUSTERS, member, "-o", "json", "--show-managed-fields")
        )
        spec, status = cluster["spec"], cluster.get("status") or {}
        assert spec["syncMode"] == "Push"
        assert spec["apiEndpoint"] == sandbox.member_url(member)
        ref = spec["secretRef"]
        secret = kube.get("secret", ref["name"], ref["namespace"])
        assert set(secret["data"]) == {"token", "caBundle"}, sorted(secret["data"])
        conditions = {c["type"]: c for c in status.get("conditions", [])}
        assert conditions["Ready"]["status"] == "True", conditions
        # What only a controller that dials the member can know: its version, its Node.
        served = json.loads(kube.on(member).ok("version", "-o", "json"))["serverVersion"]
        assert status["kubernetesVersion"] == served["gitVersion"]
        assert status["nodeSummary"] == {"totalNum": 1, "readyNum": 1}
        enabled = {e["groupVersion"]: e for e in status["apiEnablements"]}
        assert {"name": "deployments", "kind": "Deployment"} in enabled["apps/v1"]["resources"]
        writers = {m["manager"] for m in cluster["metadata"]["managedFields"]
                   if m.get("subresource") == "status"}  # fmt: skip
        assert writers == {"karmada-controller-manager"}, writers


def test_divided_policy_replicas_land_on_the_members_by_carbonshifts_weights(kube: Kube) -> None:
    namespace = kube.namespace(enabled=True)
    name = unique("web")
    policy = kube.apply_json(propagation_policy(name, namespace, annotations=WEIGHTED))
    kube.apply(deployment(name, namespace))
    weighting = weights(policy)
    assert set(weighting) == set(DEMO), f"carbonshift did not weight the policy: {policy}"
    assert weighting[GREENEST] > weighting["member-fr"] > weighting["member-pl"], weighting

    replicas = landed(kube, namespace, name)
    print(f"weights {weighting} -> replicas on the members {replicas}")
    assert replicas == webster(weighting, REPLICAS), (weighting, replicas)
    assert max(replicas, key=replicas.__getitem__) == GREENEST
    assert replicas != webster(dict.fromkeys(DEMO, 1), REPLICAS)  # not an even split
    for member, count in replicas.items():  # the member's own controllers and scheduler
        member_kube = kube.on(member)

        def made(m: MemberKube = member_kube) -> list[int] | None:
            return replica_sets(m, namespace, name) or None

        def running(m: MemberKube = member_kube, want: int = count) -> int | None:
            obj = m.find("deployment", name, namespace) or {}
            ready = (obj.get("status") or {}).get("readyReplicas")
            return ready if ready == want else None

        assert eventually(made, f"a ReplicaSet in {member}") == [count], member
        eventually(running, f"{count} Running pods in {member}")


def greenest_has_room(kube: Kube) -> None:
    """Until earlier tests' replicas have left the greenest member (ten 100m replicas need one
    CPU; with less the tiers overflow in carbon order, as they should)."""
    no_binding_terminating(kube)
    wait_rooms(kube, {GREENEST: 1}, at_least=True)


def test_green_first_policy_lands_only_on_the_greenest_member(kube: Kube) -> None:
    namespace = kube.namespace(enabled=True)
    name = unique("green-first")
    body = propagation_policy(name, namespace)
    body["metadata"]["annotations"] = {MAX_CLUSTERS: "1"}
    greenest_has_room(kube)
    policy = kube.apply_json(body)
    terms = policy["spec"]["placement"]["clusterAffinities"]
    assert terms[0]["clusterNames"] == [GREENEST], terms
    kube.apply(deployment(name, namespace))

    assert landed(kube, namespace, name) == {GREENEST: REPLICAS}
    for member in DEMO[1:]:
        assert kube.on(member).find("deployment", name, namespace) is None, member


# --------------------------------------------------------------------------- the walk-through


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DEMO_NAMESPACE = "carbonshift-demo"


def test_examples_land_as_the_walk_through_says(kube: Kube) -> None:
    documents = [d for p in sorted(EXAMPLES.glob("*.yaml"))
                 for d in yaml.safe_load_all(p.read_text()) if d]  # fmt: skip
    greenest_has_room(kube)
    try:
        kube.ok("apply", "-f", str(EXAMPLES))
        web = kube.get("propagationpolicy", "web", DEMO_NAMESPACE)
        assert carbon_order(web) == list(DEMO)
        # The ordered fill: six 100m replicas fit on the greenest member.
        replicas = landed(kube, DEMO_NAMESPACE, "web")
        assert replicas == {GREENEST: 6}, replicas
        # Green-first over the two greenest members, divided by their capacity (how
        # Karmada divides 4 replicas between them follows the room it estimates).
        report = landed(kube, DEMO_NAMESPACE, "report")
        assert set(report) <= {"member-se", "member-fr"}, report
        assert sum(report.values()) == 4
        # Opted out: stored as written, all on member-pl.
        assert landed(kube, DEMO_NAMESPACE, "pinned") == {"member-pl": 2}
        # Past the greenest member's room the rest overflows to member-fr, not member-pl.
        kube.ok("scale", "deployment", "web", "-n", DEMO_NAMESPACE, "--replicas=50")

        def scaled() -> dict[str, int] | None:
            got = landed(kube, DEMO_NAMESPACE, "web")
            return got if sum(got.values()) == 50 else None

        overflowed = eventually(scaled, "web at 50 replicas")
        assert set(overflowed) == {GREENEST, "member-fr"}, overflowed
        print(f"web {replicas}, report {report}, web at 50 {overflowed}")
    finally:
        cluster_scoped = [d for d in documents if "namespace" not in d["metadata"]
                          and d["kind"] != "Namespace"]  # fmt: skip
        for doc in cluster_scoped:
            kube.run("delete", doc["kind"].lower(), doc["metadata"]["name"], "--wait=false")
        kube.run("delete", "namespace", DEMO_NAMESPACE, "--wait=false")


# --------------------------------------------------------------------------- sandbox down


def listening_ports(pids: list[int]) -> set[int]:
    """The TCP ports these processes listen on (from /proc: their socket inodes)."""
    inodes = set()
    for pid in pids:
        fds = Path(f"/proc/{pid}/fd")
        for fd in fds.iterdir() if fds.is_dir() else []:
            try:
                target = fd.readlink().as_posix()
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    return {port for port, inode in listening() if inode in inodes}


def listening() -> list[tuple[int, str]]:
    """(port, socket inode) of every listening TCP socket on this machine."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":  # LISTEN
                found.append((int(fields[1].rsplit(":", 1)[1], 16), fields[9]))
    return found


def sandbox_cli(state: Path, command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "devtools.sandbox", command, "--state-dir", str(state)],
        capture_output=True, text=True, timeout=300, check=False,
        cwd=Layout.default().root,
    )  # fmt: skip


def test_sandbox_down_stops_everything_it_started(
    sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A second sandbox, started and stopped the way ``make sandbox``/``sandbox-down`` do,
    with its Karpenter workload cluster."""
    state = tmp_path_factory.mktemp("second-sandbox")
    started = time.monotonic()
    up = sandbox_cli(state, "up")
    assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
    print(f"second sandbox up in {time.monotonic() - started:.1f}s")
    try:
        # The Karmada fleet's processes, and the Karpenter workload cluster's under workload/.
        entries = {
            f"{p.parent.parent.name}/{p.stem}": read_pid(p) for p in state.glob("**/pids/*.pid")
        }
        pids = [e[0] for e in entries.values() if e is not None]
        wanted = {f"{state.name}/{m}-apiserver" for m in DEMO} | {"workload/karpenter"}
        assert wanted <= set(entries), sorted(entries)
        ports = listening_ports(pids)
        recorded = set(json.loads((state / "state.json").read_text())["ports"].values())
        assert recorded & ports, (recorded, ports)
        contexts = [
            c["name"] for c in yaml.safe_load((state / "kubeconfig").read_text())["contexts"]
        ]
        assert contexts == ["karmada", *DEMO]
    finally:
        down = sandbox_cli(state, "down")
    assert down.returncode == 0, down.stderr
    alive = [name for name, e in entries.items() if e is not None and pid_alive(*e)]
    assert alive == [], alive
    still = {port for port, _ in listening()} & ports
    assert still == set(), f"still listening after down: {sorted(still)}"
    assert not state.exists() or list(state.iterdir()) == [], list(state.iterdir())
    assert sandbox_cli(state, "status").returncode == 3
