"""NodePools follow the grid over time: a real ``carbonshift serve --kubeconfig`` replica
(interval and minimum interval 1 s, no forecast) reading a local Electricity Maps v3 server
for the sandbox's local zone re-evaluates managed NodePools in the sandbox. A pool the
sandbox's webhook paused at creation (the table's reading is high) and a pool that turns
``pause`` on later are paused while the local grid stays dirty and resumed when it turns
clean, their limits back byte for byte (or absent when there were none), with
``NodePoolPaused`` / ``NodePoolResumed`` Events; over time only ``spec.limits`` and
``spec.weight`` change. ``carbonshift.io/max-pause: "1m"`` ends a pause while the local
grid is still dirty."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from e2e_support import Kube, nodepool, unique
from test_fleet_labels import eventually, holder
from test_reevaluate_policies import Grid, events, follower, metric

from devtools.sandbox import Sandbox
from devtools.sandbox.objects import LOCAL_ZONE
from webhook.decision.record import Record, switches
from webhook.model.vocabulary import DECISION, MAX_PAUSE, REASON, STRATEGY

POOLS = "nodepools.karpenter.sh"
DIRTY, CLEAN = 480.0, 100.0
"""The local grid in gCO2eq/kWh: high (from 400) and low (below 150)."""


@pytest.fixture
def grid() -> Iterator[Grid]:
    with Grid() as running:
        running.values[LOCAL_ZONE] = DIRTY
        yield running


@pytest.fixture
def pools(kube: Kube) -> Iterator[list[str]]:
    """Names of the NodePools a test creates (deleted afterwards)."""
    names: list[str] = []
    yield names
    for name in names:
        kube.run("delete", POOLS, name, "--wait=false")


def record(pool: dict[str, Any]) -> Record:
    return Record.decode(pool["metadata"]["annotations"][DECISION])


def create(kube: Kube, pools: list[str], strategy: str, limits: dict[str, str] | None) -> str:
    """A NodePool decided by the sandbox's webhook (its local grid is high in the table)."""
    name = unique("pool")
    manifest = nodepool(name, strategy)
    if limits is None:
        del manifest["spec"]["limits"]
    else:
        manifest["spec"]["limits"] = limits
    kube.apply(manifest)
    pools.append(name)
    return name


def turn_on_pause(kube: Kube, name: str, *extra: str) -> None:
    """The user adds ``pause`` later (an UPDATE admission lets through untouched)."""
    kube.ok("annotate", POOLS, name, "--overwrite", f"{STRATEGY}=weight,pause", *extra)


def spec_but_limits_and_weight(pool: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in pool["spec"].items() if k not in ("limits", "weight")}


def labels(pool: dict[str, Any]) -> dict[str, str]:
    found: dict[str, str] = pool["metadata"].get("labels") or {}
    return found


def without_decision(pool: dict[str, Any]) -> dict[str, str]:
    """The annotations besides the decision record and its line."""
    return {k: v for k, v in pool["metadata"]["annotations"].items() if k not in (DECISION, REASON)}


def resumed_events(kube: Kube, name: str) -> Callable[[], list[dict[str, Any]]]:
    return lambda: pool_events(kube, name, "NodePoolResumed")


def pool_events(kube: Kube, name: str, reason: str) -> list[dict[str, Any]]:
    return events(kube, "default", name, reason)  # cluster-scoped objects: "default"


def test_nodepools_pause_while_dirty_and_resume_when_clean_with_their_limits_back(
    sandbox: Sandbox, kube: Kube, tmp_path: Path, grid: Grid, pools: list[str]
) -> None:
    mine = {"cpu": "100", "memory": "64Gi"}
    admitted = create(kube, pools, "pause", mine)
    later = create(kube, pools, "weight", None)
    first = kube.get(POOLS, admitted)
    assert first["spec"]["limits"] == {"cpu": "0", "memory": "64Gi"}  # paused at creation
    assert "limits" not in kube.get(POOLS, later)["spec"]
    turn_on_pause(kube, later)
    second = kube.get(POOLS, later)
    with follower(sandbox, tmp_path, grid) as replica:
        eventually(lambda: holder(kube, replica.name), 20.0, "leadership")
        held = eventually(
            lambda: (p := kube.get(POOLS, later)).get("spec", {}).get("limits") and p,
            20.0,
            "the pause of the pool that turned pause on",
        )
        assert held["spec"]["limits"] == {"cpu": "0"}
        assert record(held).body["paused_at"]
        (paused,) = eventually(lambda: pool_events(kube, later, "NodePoolPaused"), 10.0, "Event")
        assert paused["type"] == "Normal"
        assert f"{LOCAL_ZONE} is at 480 g/kWh (class high)" in paused["note"]
        assert "no forecast" in paused["note"]
        eventually(lambda: metric(replica, "carbonshift_paused_nodepools") >= 2, 10.0, "the gauge")
        count = metric(replica, "carbonshift_paused_nodepools")
        assert kube.get(POOLS, admitted)["spec"]["limits"] == {"cpu": "0", "memory": "64Gi"}

        grid.values[LOCAL_ZONE] = CLEAN
        back = eventually(
            lambda: (p := kube.get(POOLS, admitted))["spec"]["limits"]["cpu"] != "0" and p,
            20.0,
            "the resume of the pool paused at creation",
        )
        assert json.dumps(back["spec"]["limits"]) == json.dumps(mine)  # byte for byte
        free = eventually(
            lambda: "limits" not in (p := kube.get(POOLS, later))["spec"] and p,
            20.0,
            "the resume of the pool paused over time",
        )
        for name, before, after in ((admitted, first, back), (later, second, free)):
            # Over time only spec.limits and spec.weight (and the decision) change.
            assert spec_but_limits_and_weight(after) == spec_but_limits_and_weight(before)
            assert labels(after) == labels(before)
            assert without_decision(after) == without_decision(before)
            (resumed,) = eventually(resumed_events(kube, name), 10.0, "the Event")
            assert resumed["type"] == "Normal"
            assert "the grid is low now" in resumed["note"]
            assert f"{LOCAL_ZONE} at 100 g/kWh" in resumed["note"]
            assert switches(record(after))[-1]["pause"] == "resumed"
        assert free["spec"]["weight"] == 90  # the weight follows the grid too
        eventually(
            lambda: metric(replica, "carbonshift_paused_nodepools") <= count - 2,
            10.0,
            "the gauge going down",
        )
        assert metric(replica, "carbonshift_writes_total", kind="NodePool") >= 3


def test_max_pause_ends_a_pause_while_the_grid_is_still_dirty(
    sandbox: Sandbox, kube: Kube, tmp_path: Path, grid: Grid, pools: list[str]
) -> None:
    name = create(kube, pools, "weight", {"cpu": "8"})
    turn_on_pause(kube, name, f"{MAX_PAUSE}=1m")
    with follower(sandbox, tmp_path, grid) as replica:
        eventually(lambda: holder(kube, replica.name), 20.0, "leadership")
        held = eventually(
            lambda: (p := kube.get(POOLS, name))["spec"]["limits"]["cpu"] == "0" and p,
            20.0,
            "the pause",
        )
        assert "max-pause 1m" in pool_events(kube, name, "NodePoolPaused")[0]["note"]
        began = datetime.fromisoformat(record(held).body["paused_at"].replace("Z", "+00:00"))
        back = eventually(
            lambda: (p := kube.get(POOLS, name))["spec"]["limits"]["cpu"] != "0" and p,
            90.0,
            "the resume at max-pause",
        )
        assert grid.values[LOCAL_ZONE] == DIRTY
        assert back["spec"]["limits"] == {"cpu": "8"}
        body = record(back).body
        ended = datetime.fromisoformat(body["resumed_at"].replace("Z", "+00:00"))
        assert (ended - began).total_seconds() >= 60
        assert "paused_at" not in body
        (resumed,) = eventually(
            lambda: pool_events(kube, name, "NodePoolResumed"), 10.0, "the Event"
        )
        assert "max-pause 1m used up" in resumed["note"]
        # Still dirty, but the pool runs at least an hour before a new pause.
        writes = metric(replica, "carbonshift_writes_total", kind="NodePool")
        eventually(
            lambda: (
                metric(replica, "carbonshift_reevaluations_total", kind="NodePool") >= writes + 3
            ),
            10.0,
            "more passes",
        )
        assert kube.get(POOLS, name)["spec"]["limits"] == {"cpu": "8"}
        assert metric(replica, "carbonshift_writes_total", kind="NodePool") == writes
