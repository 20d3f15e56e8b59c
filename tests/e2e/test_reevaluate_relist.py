"""The leader misses nothing when the API server restarts under its watches: a real
``carbonshift serve --kubeconfig`` replica that looks at every object again only hourly
follows the sandbox's Karmada API server through a restart (its watches resume or, with
``410 Gone``, list again), then decides a policy created after the restart from what its
caches saw, and switches both policies when the grid turns."""

from __future__ import annotations

import time
from pathlib import Path

import yaml
from e2e_support import WEIGHTED, Kube, propagation_policy, unique
from test_fleet_labels import eventually, holder
from test_reevaluate_policies import (
    MEMBERS,
    POLICIES,
    Grid,
    follower,
    greenest,
    grid,
    managed,
    metric,
)

from devtools.sandbox import Sandbox

__all__ = ["grid", "managed"]  # the fixtures, reused as they are
HOURLY = {
    "reevaluate": {"interval_seconds": 3600, "min_interval_seconds": 1,
                   "forecast": "day-ahead-profile"},
}  # fmt: skip
"""Nothing is looked at again on a timer within the test: what it sees comes from watches
and the feed."""
RELISTS = "carbonshift_kube_relists_total"


def test_an_api_server_restart_mid_watch_misses_nothing(
    sandbox: Sandbox, kube: Kube, tmp_path: Path, grid: Grid, managed: tuple[str, str]
) -> None:
    namespace, first = managed
    with follower(sandbox, tmp_path, grid, extra=HOURLY) as replica:
        eventually(lambda: holder(kube, replica.name), 30.0, "leadership")
        kept = "carbonshift_reevaluations_total"
        eventually(
            lambda: metric(replica, kept, kind="PropagationPolicy", outcome="kept") >= 1,
            30.0,
            "the first sync deciding the policy",
        )
        relists = metric(replica, RELISTS)
        stopped = time.monotonic()
        sandbox.stop("kube-apiserver")
        sandbox.start("kube-apiserver", timeout=120.0)
        down = time.monotonic() - stopped
        # Created after the restart: the replica knows it only from its watch or a relist.
        second = unique("after")
        placement = {
            "clusterAffinity": {"clusterNames": MEMBERS},
            "replicaScheduling": {"replicaSchedulingType": "Divided"},
        }
        policy = yaml.safe_dump(
            propagation_policy(second, namespace, placement=placement, annotations=WEIGHTED)
        )
        eventually(
            lambda: kube.run("apply", "-f", "-", stdin=policy).returncode == 0,
            60.0,
            "an apply through the restarted API server",
        )
        assert greenest(kube.get(POLICIES, second, namespace)) == "member-se"
        turned = time.monotonic()
        grid.values.update({"SE-SE3": 900.0, "FR": 40.0})  # the grid turns

        def favoured() -> dict[str, str]:
            return {n: greenest(kube.get(POLICIES, n, namespace)) for n in (first, second)}

        eventually(
            lambda: set(favoured().values()) == {"member-fr"},
            60.0,
            "both policies switched to member-fr",
            shown=favoured,
        )
        switched = time.monotonic() - turned
        after = (
            eventually(
                lambda: max(metric(replica, RELISTS) - relists, 0),
                30.0,
                "a relist after the restart",
                shown=lambda: metric(replica, RELISTS),
            )
            + relists
        )
        print(
            f"\nAPI server down and back in {down:.1f} s; relists {relists:g} -> {after:g}; "
            f"both policies switched {switched:.1f} s after the grid turned (interval 3600 s)"
        )
