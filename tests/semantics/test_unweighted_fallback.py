"""Green-first terms over a policy's own static weights keep its unweighted clusters in
the fallback: Karmada weighs every feasible cluster 1 when none of the weighted ones is
feasible, so a greenest term of weighted clusters that do not exist must not strand the
workload (found by the generated-policy corpus)."""

from __future__ import annotations

from typing import Any

from tests.semantics.holds import assert_holds
from webhook import testing

POLICY: dict[str, Any] = testing.propagation_policy(
    "generated", namespace="shop", annotations={"carbonshift.io/max-clusters": "1"}
)
POLICY["spec"]["placement"] = {
    "clusterAffinity": {
        "clusterNames": ["cloud-gpu-cluster1", "cluster-b", "ghost"],
        "exclude": ["cloud-gpu-cluster1"],
    },
    "replicaScheduling": {
        "replicaSchedulingType": "Divided",
        "replicaDivisionPreference": "Weighted",
        "weightPreference": {
            "staticWeightList": [
                {"targetCluster": {"clusterNames": [name]}, "weight": 1}
                for name in ("cloud-gpu-cluster1", "cloud-gpu-cluster2", "cluster-a", "ghost")
            ]
        },
    },
}


def test_weighted_clusters_that_do_not_exist_leave_the_unweighted_reachable() -> None:
    assert_holds(POLICY)
