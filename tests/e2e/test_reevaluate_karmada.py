"""Re-evaluation switches reach the workloads, and survive a leader's death.

With the real karmada-controller-manager and karmada-scheduler (the ``karmada`` fixture
of ``test_schedulers``): after a ``carbonshift serve --kubeconfig`` replica switches a
managed policy (a Divided policy's static weights, a ``max-clusters`` policy's
green-first ``clusterAffinities``), the ResourceBinding's ``spec.clusters`` follows.

Two replicas sharing a Lease, the leader SIGKILLed while the grid has just turned: every
managed policy is switched exactly once (one placement write: ``metadata.generation``
moves by one, one entry in ``switches``) with exactly one ``CarbonRebalanced`` Event.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import test_reevaluate_policies
import test_schedulers
from e2e_support import (
    BINDINGS,
    PASSES,
    Kube,
    more_passes,
    no_binding_terminating,
    print_bindings,
    propagation_policy,
    unique,
    wait_rooms,
    weights,
)
from test_fleet_labels import Replica, eventually, holder
from test_reevaluate_policies import MEMBERS, POLICIES, Grid, events, follower, greenest, record
from test_schedulers import REPLICAS, deployment

from devtools.sandbox import Sandbox
from webhook.decision.record import switches

pytestmark = pytest.mark.timeout(600)

# Fixtures reused as they are: the real Karmada, the fake grid, a managed Divided policy.
karmada = test_schedulers.karmada
grid = test_reevaluate_policies.grid
managed = test_reevaluate_policies.managed

MAX_CLUSTERS = "carbonshift.io/max-clusters"
TURN = {"SE-SE3": 900.0, "FR": 40.0}
"""The grid turns: member-se becomes dirty, member-fr the greenest."""


def scheduled(kube: Kube, namespace: str, name: str) -> dict[str, int] | None:
    """Cluster -> replicas of the Deployment's ResourceBinding once Karmada scheduled the
    placement the binding holds now (None before)."""
    result = kube.run("get", BINDINGS, f"{name}-deployment", "-n", namespace, "-o", "json")
    if result.returncode != 0:
        return None
    binding = json.loads(result.stdout)
    status = binding.get("status") or {}
    done = any(
        c["type"] == "Scheduled" and c["status"] == "True" for c in status.get("conditions", [])
    )
    applied = (binding["metadata"].get("annotations") or {}).get(
        "policy.karmada.io/applied-placement"
    )
    current = applied is not None and json.loads(applied) == binding["spec"].get("placement")
    clusters = binding["spec"].get("clusters") or []
    if not (done and current and clusters):
        return None
    return {c["name"]: c.get("replicas", 0) for c in clusters}


def follows(weighting: dict[str, int], replicas: dict[str, int]) -> bool:
    """Replicas divided by the static weights (Webster: within one seat of the quota)."""
    total = sum(weighting.values())
    return sum(replicas.values()) == REPLICAS and all(
        abs(replicas.get(c, 0) - REPLICAS * w / total) <= 1 for c, w in weighting.items()
    )


def test_karmada_moves_replicas_after_a_divided_policy_switches(
    karmada: Sandbox,
    kube: Kube,
    tmp_path: Path,
    grid: Grid,
    managed: tuple[str, str],
) -> None:
    namespace, name = managed
    kube.apply(deployment(name, namespace))
    policy = kube.get(POLICIES, name, namespace)
    first = eventually(lambda: scheduled(kube, namespace, name), 60.0, "the first schedule")
    assert max(first, key=first.__getitem__) == "member-se", first
    assert follows(weights(policy), first), (weights(policy), first)

    with follower(karmada, tmp_path, grid) as replica:
        eventually(lambda: holder(kube, replica.name), 20.0, "leadership")
        grid.values.update(TURN)
        switched = eventually(
            lambda: (p := kube.get(POLICIES, name, namespace)) and greenest(p) == "member-fr" and p,
            30.0,
            "the switch to member-fr",
        )
        new = weights(switched)

        def moved() -> dict[str, int] | None:
            got = scheduled(kube, namespace, name)
            return got if got is not None and follows(new, got) else None

        replicas = eventually(moved, 60.0, f"the binding to follow {new}")
        assert max(replicas, key=replicas.__getitem__) == "member-fr", replicas
        assert replicas.get("member-se", 0) < first["member-se"], (first, replicas)


def test_karmada_moves_replicas_after_a_max_clusters_policy_switches(
    karmada: Sandbox, kube: Kube, tmp_path: Path, grid: Grid
) -> None:
    namespace = kube.namespace(enabled=True)
    name = unique("greenest")
    placement = {
        "clusterAffinity": {"clusterNames": MEMBERS},
        "replicaScheduling": {"replicaSchedulingType": "Divided"},
    }
    body = propagation_policy(name, namespace, placement=placement)
    body["metadata"]["annotations"] = {MAX_CLUSTERS: "1"}
    # The ten 100m replicas fit member-se only once earlier tests' replicas have left it
    # (the green-first tiers overflow to member-fr otherwise, as they should).
    no_binding_terminating(kube)
    wait_rooms(kube, {"member-se": 1}, at_least=True)
    kube.apply(body)
    kube.apply(deployment(name, namespace))
    first = eventually(lambda: scheduled(kube, namespace, name), 60.0, "the first schedule")
    if first != {"member-se": REPLICAS}:
        print_bindings(kube)
    assert first == {"member-se": REPLICAS}, first

    with follower(karmada, tmp_path, grid) as replica:
        eventually(lambda: holder(kube, replica.name), 20.0, "leadership")
        grid.values.update(TURN)

        def switched() -> dict[str, Any] | None:
            policy = kube.get(POLICIES, name, namespace)
            return policy if switches(record(policy)) else None

        policy = eventually(switched, 30.0, "the switch")
        terms = policy["spec"]["placement"]["clusterAffinities"]
        assert terms[0]["clusterNames"] == ["member-fr"], terms

        def moved() -> dict[str, int] | None:
            got = scheduled(kube, namespace, name)
            return got if got == {"member-fr": REPLICAS} else None

        eventually(moved, 60.0, "all replicas on member-fr")
    kube.run("delete", "namespace", namespace, "--wait=false")  # later replicas leave it be


POLICY_COUNT = 20


def test_a_killed_leader_loses_and_doubles_no_switch(
    sandbox: Sandbox, kube: Kube, tmp_path: Path, grid: Grid
) -> None:
    namespace = kube.namespace(enabled=True)
    names = [unique("survive") for _ in range(POLICY_COUNT)]
    placement = {
        "clusterAffinity": {"clusterNames": MEMBERS},
        "replicaScheduling": {"replicaSchedulingType": "Divided"},
    }
    for name in names:
        kube.apply(propagation_policy(name, namespace, placement=placement))

    def listed() -> dict[str, dict[str, Any]]:
        out = kube.ok("get", POLICIES, "-n", namespace, "-o", "json")
        return {p["metadata"]["name"]: p for p in json.loads(out)["items"]}

    before = listed()
    assert all(greenest(p) == "member-se" for p in before.values())

    with follower(sandbox, tmp_path, grid) as first:
        eventually(lambda: holder(kube, first.name), 20.0, "the first leader")
        config = tmp_path / "config.yaml"  # the follower's, shared by the second replica
        second = Replica(sandbox, tmp_path, f"{first.name}-b", config, first.name)
        try:
            time.sleep(2.0)  # the second replica campaigns and waits
            assert holder(kube, first.name) == first.name
            grid.values.update(TURN)

            def begun() -> int:
                return sum(bool(switches(record(p))) for p in listed().values())

            done_by_first = eventually(begun, 30.0, "the first switch")
            first.process.send_signal(signal.SIGKILL)  # mid-run: no step-down, no Lease release
            first.process.wait(10)

            eventually(lambda: holder(kube, first.name) == second.name, 40.0, "the takeover")
            eventually(lambda: begun() == POLICY_COUNT, 30.0, "every policy switched")
            more_passes(lambda: second.metric(PASSES), 4)  # they must keep everything

            after = listed()
            for name in names:
                policy = after[name]
                assert greenest(policy) == "member-fr", name
                assert len(switches(record(policy))) == 1, (name, switches(record(policy)))
                generations = (
                    before[name]["metadata"]["generation"],
                    policy["metadata"]["generation"],
                )
                assert generations[1] == generations[0] + 1, (name, generations)
                rebalanced = events(kube, namespace, name, "CarbonRebalanced")
                assert len(rebalanced) == 1, (name, rebalanced)
                assert int(policy["metadata"]["resourceVersion"]) > int(
                    before[name]["metadata"]["resourceVersion"]
                )
            by = [
                e["reportingInstance"]
                for n in names
                for e in events(kube, namespace, n, "CarbonRebalanced")
            ]
            print(f"switched by the killed leader before its death: >= {done_by_first}; "
                  f"Events by replica: { {r: by.count(r) for r in set(by)} }")  # fmt: skip
            assert set(by) <= {first.name, second.name}, by
        except BaseException:
            print("\n".join(second.log.read_text().splitlines()[-60:]))
            raise
        finally:
            second.stop()
            # Opt the namespace out: replicas of later tests leave these policies alone.
            kube.ok("label", "namespace", namespace, "carbonshift.io/enabled=false", "--overwrite")
