"""The whole application goes where its replicas go, on the real Karmada.

Karmada v1.18 sends a term's ``overflowAffinities`` workloads only: a ConfigMap or Service
selected by the same policy reaches the primary group alone. carbonshift's leader keeps a
``requiredBy`` snapshot of every tier's clusters on the policy's non-workload bindings, so
Karmada's binding controller sends them wherever a replica may run
(:mod:`webhook.decision.karmada.carry`). The sandbox's members differ in size (member-se holds four
one-CPU replicas, member-fr eight):

- a policy selecting a Deployment of ten one-CPU replicas, the ConfigMap its pods read
  through ``envFrom`` and the Service in front of them, opted in with no knobs: replicas
  4 on member-se, 6 on member-fr, and every member with replicas has the ConfigMap and the
  Service (so has member-pl, the last tier);
- the grid turns (member-fr the greenest): the leader rewrites the tiers and moves replicas
  there; the ConfigMap and the Service are still wherever replicas run;
- ``propagateDeps: true`` and a ConfigMap the policy does not select: Karmada's
  dependencies distributor sends it after the replicas, overflow tiers included;
- ``activationPreference: Lazy``: the leader's rewrite is recorded as ``CarbonPolicyLazy``,
  Karmada keeps scheduling on the placement it applied, and no move is counted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_support import (
    BINDINGS,
    DEMO,
    Kube,
    deployment,
    eventually,
    print_bindings,
    propagation_policy,
    unique,
    wait_rooms,
)
from test_capacity import CPU, FULL, namespace, scheduled, settles
from test_fleet_labels import holder
from test_reevaluate_policies import Grid, events, follower, metric, record

from devtools.sandbox import Sandbox
from webhook.decision.karmada.terms import fill_tiers

pytestmark = pytest.mark.timeout(600)

GREENEST, MIDDLE, DIRTIEST = DEMO
__all__ = ["namespace"]  # the fixture, reused as it is
TURN = {"SE-SE3": 900.0, "FR": 40.0, "PL": 1000.0}
"""The grid turns: member-fr the greenest, member-se next. Far enough past the hysteresis
(margin 0.1 on the tier-weighted mean: 669 -> 423 g/kWh), where a small turn (FR 10 g
against SE 25 g, PL unchanged) moves the weighted mean by 3 % and rightly switches nothing."""


@pytest.fixture
def grid() -> Iterator[Grid]:
    with Grid() as running_grid:
        yield running_grid


def application(name: str, namespace: str, *, deps: bool = False) -> list[dict[str, Any]]:
    """ConfigMap ``<name>-config``, Service ``<name>`` and Deployment ``<name>`` whose pods
    read the ConfigMap through ``envFrom``; the policy selects all three (``deps``: only the
    Deployment and the Service, with ``propagateDeps: true``)."""
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{name}-config", "namespace": namespace},
        "data": {"GREETING": "hello"},
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"app": name}, "ports": [{"port": 80, "targetPort": 8080}]},
    }
    app = deployment(name, namespace, replicas=10, cpu=CPU)
    container = app["spec"]["template"]["spec"]["containers"][0]
    container["envFrom"] = [{"configMapRef": {"name": f"{name}-config"}}]
    policy = propagation_policy(name, namespace)
    selectors = [{"apiVersion": "v1", "kind": "Service", "name": name}]
    if deps:
        policy["spec"]["propagateDeps"] = True
    else:
        selectors.append({"apiVersion": "v1", "kind": "ConfigMap", "name": f"{name}-config"})
    policy["spec"]["resourceSelectors"] += selectors
    return [config, service, policy, app]


def where(kube: Kube, namespace: str, name: str) -> dict[str, tuple[bool, bool]]:
    """Member -> (has the ConfigMap, has the Service)."""
    return {
        m: (
            kube.on(m).find("configmap", f"{name}-config", namespace) is not None,
            kube.on(m).find("service", name, namespace) is not None,
        )
        for m in DEMO
    }


def whole(kube: Kube, namespace: str, name: str, members: list[str]) -> None:
    """Until every member in ``members`` has the ConfigMap and the Service."""
    seen: list[Any] = []

    def there() -> bool | None:
        now = where(kube, namespace, name)
        seen[:] = [now]
        return all(now[m] == (True, True) for m in members) or None

    try:
        eventually(there, f"ConfigMap and Service of {name} on {members}", timeout=90.0)
    except BaseException:
        print(f"member -> (configmap, service): {seen}")
        print_bindings(kube)
        for suffix in ("-config-configmap", "-service"):
            found = kube.run("get", BINDINGS, name + suffix, "-n", namespace, "-o", "json")
            print(suffix, found.stdout[-2000:] or found.stderr)
        log = kube.sandbox.layout.log("karmada-controller-manager")
        lines = [ln for ln in log.read_text(errors="replace").splitlines() if name in ln]
        print("karmada-controller-manager about", name, *lines[-40:], sep="\n")
        raise


def apply_application(kube: Kube, namespace: str, name: str, *, deps: bool = False) -> None:
    config, service, policy, app = application(name, namespace, deps=deps)
    kube.apply(config)
    kube.apply(service)
    stored = kube.apply_json(policy)
    placement = stored["spec"]["placement"]
    assert fill_tiers(placement) == [[GREENEST], [MIDDLE], [DIRTIEST]], placement
    carried = record(stored).body.get("carry")
    assert carried == (["Service"] if deps else ["Service", "ConfigMap"]), record(stored).body
    kube.apply(app)


def test_an_application_policy_sends_its_configmap_and_service_wherever_replicas_run(
    kube: Kube, namespace: str
) -> None:
    name = unique("whole")
    apply_application(kube, namespace, name)
    settles(kube, namespace, name, {GREENEST: 4, MIDDLE: 6})
    whole(kube, namespace, name, list(DEMO))
    carried = events(kube, namespace, name, "CarbonResourcesCarried")
    assert carried, "no CarbonResourcesCarried Event on the policy"
    assert any(f"{name}-config" in e["note"] for e in carried), carried


def test_propagate_deps_sends_an_unselected_configmap_after_the_overflowing_replicas(
    kube: Kube, namespace: str
) -> None:
    name = unique("deps")
    apply_application(kube, namespace, name, deps=True)
    settles(kube, namespace, name, {GREENEST: 4, MIDDLE: 6})
    whole(kube, namespace, name, [GREENEST, MIDDLE])


def test_after_the_grid_turns_the_application_is_still_whole_where_replicas_run(
    sandbox: Sandbox, kube: Kube, namespace: str, tmp_path: Path, grid: Grid
) -> None:
    name = unique("turn")
    apply_application(kube, namespace, name)
    settles(kube, namespace, name, {GREENEST: 4, MIDDLE: 6})
    whole(kube, namespace, name, list(DEMO))
    with follower(sandbox, tmp_path, grid) as leader:
        eventually(lambda: holder(kube, leader.name), "leadership", timeout=30.0)
        wait_rooms(kube, {GREENEST: 0, MIDDLE: FULL[MIDDLE] - 6})
        grid.values.update(TURN)  # member-fr turns greenest: the rest of its room fills
        settles(kube, namespace, name, {MIDDLE: 8, GREENEST: 2})
        # Karmada schedules the rewritten placement itself (its new first tier takes its
        # room): the leader leaves that binding to it instead of racing it with a move.
        assert metric(leader, "carbonshift_replicas_moved_total") == 0
        assert metric(leader, "carbonshift_rebalances_total", outcome="in_flight") >= 1
        whole(kube, namespace, name, list(DEMO))
        policy = json.loads(
            kube.ok("get", "propagationpolicies", name, "-n", namespace, "-o", "json")
        )
        assert fill_tiers(policy["spec"]["placement"])[0] == [MIDDLE]


def test_a_lazy_policy_is_rewritten_but_no_move_is_counted(
    sandbox: Sandbox, kube: Kube, namespace: str, tmp_path: Path, grid: Grid
) -> None:
    name = unique("lazy")
    config, service, policy, app = application(name, namespace)
    policy["spec"]["activationPreference"] = "Lazy"
    for obj in (config, service):
        kube.apply(obj)
    stored = kube.apply_json(policy)
    assert record(stored).body.get("lazy") is True
    kube.apply(app)
    settles(kube, namespace, name, {GREENEST: 4, MIDDLE: 6})
    with follower(sandbox, tmp_path, grid) as leader:
        eventually(lambda: holder(kube, leader.name), "leadership", timeout=30.0)
        grid.values.update(TURN)
        lazy = eventually(
            lambda: events(kube, namespace, name, "CarbonPolicyLazy") or None,
            "a CarbonPolicyLazy Event",
        )
        assert "activationPreference Lazy" in lazy[0]["note"], lazy
        eventually(
            lambda: metric(leader, "carbonshift_rebalances_total", outcome="lazy") or None,
            "a rebalance pass that left the lazy policy alone",
        )
        assert metric(leader, "carbonshift_replicas_moved_total") == 0
        assert metric(leader, "carbonshift_lazy_policies") >= 1
        assert events(kube, namespace, name, "CarbonRebalanced") == []
        # Karmada keeps the placement it applied: the binding still names member-se first.
        binding = json.loads(
            kube.ok("get", BINDINGS, f"{name}-deployment", "-n", namespace, "-o", "json")
        )
        assert fill_tiers(binding["spec"]["placement"])[0] == [GREENEST]
        assert scheduled(kube, namespace, name) == {GREENEST: 4, MIDDLE: 6}
        # A change of the template activates the rewritten placement.
        kube.ok("annotate", "deployment", name, "-n", namespace, "touched=yes", "--overwrite")

        def applied() -> bool | None:
            got = json.loads(
                kube.ok("get", BINDINGS, f"{name}-deployment", "-n", namespace, "-o", "json")
            )
            tiers = fill_tiers(got["spec"]["placement"])
            return bool(tiers and tiers[0] == [MIDDLE]) or None

        eventually(applied, "the binding on the rewritten placement")
