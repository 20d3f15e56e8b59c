"""Liqo virtual nodes: the remote cluster's grid zone, in a Karmada Cluster's order, and
the extender's ranking of virtual nodes against each other and against local nodes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
import pytest

from tests.support import make_state
from webhook.cli import intensity as cli_intensity
from webhook.decision.clusters import node_candidate, node_zone
from webhook.decision.liqo import peers as liqo
from webhook.kube.nodes import resolve
from webhook.kube.peers import PeerInventory
from webhook.model.config import ClusterConfig, Config
from webhook.model.validation import InvalidInput
from webhook.serve import schedapi

CONFIG = Config(clusters={"c-config": ClusterConfig(name="c-config", zone="PL")})


def virtual(
    name: str,
    cluster_id: str,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A Node labelled as Liqo's virtual kubelet labels it (plus ``labels``)."""
    return {
        "metadata": {
            "name": name,
            "labels": {
                "liqo.io/type": "virtual-node",
                "liqo.io/remote-cluster-id": cluster_id,
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node.kubernetes.io/exclude-from-external-load-balancers": "true",
                **(labels or {}),
            },
            "annotations": dict(annotations or {}),
        },
        "spec": {"taints": [{"key": "virtual-node.liqo.io/not-allowed", "effect": "NoExecute"}]},
    }


def local(name: str, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}}
    }


ZONE = "carbonshift.io/zone"
REGION = "topology.kubernetes.io/region"
CASES = [
    (virtual("n", "c1", {ZONE: "SE-SE3", "liqo.io/provider": "aws", REGION: "eu-west-3"}),
     "SE-SE3", "label"),
    (virtual("n", "c1", None, {ZONE: "FR"}), "FR", "annotation"),
    (virtual("n", "c1", {ZONE: "no good"}, {ZONE: "FR"}), "FR", "annotation"),
    (virtual("n", "c-config", {"liqo.io/provider": "aws", REGION: "eu-west-3"}), "PL", "config"),
    (virtual("n", "c1", {"liqo.io/provider": "eks", REGION: "eu-central-1"}), "DE",
     "region-table"),
    (virtual("n", "c1", {"liqo.io/provider": "gke", REGION: "europe-west9"}), "FR",
     "region-table"),
    (virtual("n", "c1", {"liqo.io/provider": "kind", REGION: "westeurope"}), "NL",
     "region-table"),
    (virtual("n", "c1", {"liqo.io/provider": "aws", REGION: "nowhere-1"}), None, "unknown"),
    (virtual("n", "c1"), None, "unknown"),
]  # fmt: skip


@pytest.mark.parametrize(("node", "zone", "source"), CASES)
def test_a_virtual_node_has_its_remote_clusters_zone_in_a_karmada_clusters_order(
    node: dict[str, Any], zone: str | None, source: str
) -> None:
    found = liqo.peer(node, CONFIG)
    assert (found.grid_zone, found.zone_source, found.cluster_id) == (
        zone,
        source,
        node["metadata"]["labels"]["liqo.io/remote-cluster-id"],
    )
    # The extender resolves the same node to the same zone, through the same functions.
    meta = node["metadata"]
    candidate = node_candidate(meta["name"], meta["labels"], None, meta["annotations"])
    assert node_zone(candidate, CONFIG, local="IN-WE") == zone


def test_a_malformed_zone_label_is_a_problem_not_a_failure() -> None:
    found = liqo.peer(virtual("n", "c1", {ZONE: "no good", REGION: "westeurope"}), CONFIG)
    assert found.grid_zone == "NL"
    assert [p.path for p in found.problems] == [f"metadata.labels.{ZONE}"]


@pytest.mark.parametrize(
    ("node", "path"),
    [
        (local("n"), "metadata.labels.liqo.io/type"),
        ({"metadata": {"labels": {"liqo.io/type": "virtual-node"}}}, "metadata.name"),
        ({"metadata": {"name": "n", "labels": {"liqo.io/type": "virtual-node"}}},
         "metadata.labels.liqo.io/remote-cluster-id"),
    ],
)  # fmt: skip
def test_only_a_virtual_node_naming_its_remote_cluster_is_a_peer(
    node: dict[str, Any], path: str
) -> None:
    with pytest.raises(InvalidInput) as raised:
        liqo.peer(node, CONFIG)
    assert raised.value.path == path


def test_local_nodes_keep_the_local_zone_and_virtual_nodes_do_not_vote_for_it() -> None:
    nodes = [
        local("a", {REGION: "eu-central-1"}),
        virtual("v1", "c1", {REGION: "eu-north-1"}),
        virtual("v2", "c2", {REGION: "eu-north-1"}),
    ]
    assert resolve(nodes, None).zone == "DE"
    bare = local("b")["metadata"]
    assert node_zone(node_candidate("b", bare["labels"], None), CONFIG, local="DE") == "DE"
    assert node_zone(node_candidate("b", bare["labels"], None), CONFIG) is None


async def prioritize(config: Config, nodes: list[dict[str, Any]]) -> dict[str, int]:
    state = await make_state(config)
    body = orjson.dumps({"Pod": {"metadata": {}}, "Nodes": {"items": nodes}})
    return {h["Host"]: h["Score"] for h in orjson.loads(schedapi.extender_prioritize(state, body))}


async def test_the_extender_ranks_a_greener_peer_above_a_dirtier_one_and_the_local_grid() -> None:
    config = Config(zone="DE", clusters={"c-pl": ClusterConfig(name="c-pl", zone="PL")})
    scores = await prioritize(
        config,
        [
            local("local"),  # the local zone: DE, 400 g
            virtual("liqo-se", "c-se", {ZONE: "SE-SE3"}),  # 30 g, declared by the peer
            virtual("liqo-fr", "c-fr", {"liqo.io/provider": "gke", REGION: "europe-west9"}),
            virtual("liqo-pl", "c-pl"),  # 700 g, configured by cluster id
        ],
    )
    assert scores == {"liqo-se": 10, "liqo-fr": 10, "local": 6, "liqo-pl": 3}


async def test_two_peers_in_one_region_keep_their_own_configured_zones() -> None:
    config = Config(
        clusters={
            "c-a": ClusterConfig(name="c-a", zone="SE-SE3"),
            "c-b": ClusterConfig(name="c-b", zone="PL"),
        }
    )
    scores = await prioritize(
        config,
        [
            virtual("a", "c-a", {REGION: "eu-west-3"}),
            virtual("b", "c-b", {REGION: "eu-west-3"}),
        ],
    )
    assert scores == {"a": 10, "b": 3}


async def test_the_extender_filter_passes_a_peer_it_cannot_judge() -> None:
    state = await make_state(Config(zone="DE"))
    nodes = [local("local"), virtual("unknown", "c-x"), virtual("dirty", "c-pl", {ZONE: "PL"})]
    body = orjson.dumps(
        {
            "Pod": {"metadata": {"annotations": {"carbonshift.io/max-intensity": "500"}}},
            "Nodes": {"items": nodes},
        }
    )
    answer = orjson.loads(schedapi.extender_filter(state, body))
    assert [n["metadata"]["name"] for n in answer["Nodes"]["items"]] == ["local", "unknown"]
    assert list(answer["FailedAndUnresolvableNodes"]) == ["dirty"]


def test_intensity_clusters_lists_the_remote_clusters_with_their_zone_source() -> None:
    ready = {"conditions": [{"type": "Ready", "status": "True"}]}
    nodes = [
        {**virtual("liqo-se", "c-se", {ZONE: "SE-SE3"}), "status": ready},
        virtual("liqo-pl", "c-config"),
        virtual("liqo-aws", "c-aws", {"liqo.io/provider": "aws", REGION: "eu-central-1"}),
        {"metadata": {"name": "broken", "labels": {"liqo.io/type": "virtual-node"}}},
    ]
    found, skipped = cli_intensity.members(CONFIG, [], nodes)
    assert [(m.name, m.zone, m.zone_source, m.ready) for m in found] == [
        ("c-config", "PL", "config", None),  # config-only: still listed
        ("liqo/c-aws", "DE", "region-table", False),
        ("liqo/c-config", "PL", "config", False),
        ("liqo/c-se", "SE-SE3", "label", True),
    ]
    assert list(skipped) == ["liqo/broken"]


def test_the_peer_inventory_follows_list_and_watch_events() -> None:
    peers = PeerInventory(CONFIG)
    peers.replace([virtual("a", "c-a", {ZONE: "FR"}), local("not-virtual")])
    first = peers.clusters()
    assert {n: p.grid_zone for n, p in first.items()} == {"a": "FR"}
    peers.event("MODIFIED", virtual("a", "c-a", {ZONE: "FR"}))
    assert peers.clusters() is first  # nothing zone resolution reads changed
    peers.event("ADDED", virtual("b", "c-config"))
    assert {p.cluster_id: p.grid_zone for p in peers.by_cluster_id().values()} == {
        "c-a": "FR",
        "c-config": "PL",
    }
    peers.event("DELETED", virtual("a", "c-a"))
    assert list(peers.clusters()) == ["b"]
