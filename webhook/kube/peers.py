"""Liqo's virtual nodes (the remote clusters this cluster offloads to), in memory.

Readers call :meth:`PeerInventory.clusters` (synchronous; keyed by the virtual node's
name, each a :class:`~webhook.decision.liqo.peers.Peer` with the remote cluster's id and grid
zone). A background :class:`~webhook.kube.watch.ListWatch` of the Nodes labelled
``liqo.io/type=virtual-node`` keeps it current; what a Node means is decided by the pure
:func:`webhook.decision.liqo.peers.peer`. A cluster without Liqo simply has no virtual nodes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import structlog
from kubernetes_asyncio import client

from webhook.decision.liqo.peers import SELECTOR, Peer, peer, place
from webhook.kube.cache import WatchedCache
from webhook.kube.watch import CoreObjects
from webhook.model import vocabulary
from webhook.model.config import ClusterConfig, Config
from webhook.model.resources import Resource

log = structlog.get_logger("carbonshift.peers")


class PeerInventory:
    """Liqo virtual nodes by node name, with their remote clusters' grid zones (a
    :class:`WatchedCache` of the Nodes labelled ``liqo.io/type=virtual-node``)."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.cache: WatchedCache[Peer] = WatchedCache(
            Resource("", "v1", "nodes", "Node"),
            self._decode,
            kind="virtual_node",
            objects=CoreObjects.of("list_node"),
            label_selector=SELECTOR,
        )
        self._places: tuple[object, Mapping[str, ClusterConfig]] = (None, MappingProxyType({}))

    def clusters(self) -> Mapping[str, Peer]:
        """Every virtual node by name (a read-only snapshot; replaced on each change)."""
        return self.cache.items()

    def by_cluster_id(self) -> Mapping[str, Peer]:
        """The same peers by remote cluster id (one virtual node per remote cluster)."""
        return {p.cluster_id: p for _, p in sorted(self.cache.items().items())}

    def places(self) -> Mapping[str, ClusterConfig]:
        """The remote clusters by id as decisions read them (:func:`liqo.place`); the same
        mapping object until the virtual nodes change."""
        view = self.cache.items()
        if self._places[0] is not view:
            places = {i: place(p) for i, p in self.by_cluster_id().items()}
            self._places = (view, MappingProxyType(places))
        return self._places[1]

    @property
    def synced(self) -> bool:
        return self.cache.synced

    def replace(self, objects: Sequence[Mapping[str, Any]]) -> None:
        """A full list of the virtual nodes."""
        self.cache.replace(objects)

    def event(self, kind: str, obj: Mapping[str, Any]) -> None:
        """One watch event on a virtual node."""
        self.cache.event(kind, obj)

    def _decode(self, obj: Mapping[str, Any], previous: Peer | None) -> Peer:
        found = peer(obj, self.config)
        for problem in found.problems:
            if previous is None or problem not in previous.problems:
                log.warning("virtual_node_value_ignored", node=found.node, problem=str(problem))
        if found.grid_zone is None and (previous is None or previous.grid_zone is not None):
            log.warning(
                "virtual_node_zone_unknown",
                node=found.node,
                cluster_id=found.cluster_id,
                hint=f"declare {vocabulary.ZONE}=<zone> in the provider's --cluster-labels "
                f"or add clusters.{found.cluster_id}",
            )
        return found

    def start(self, api: client.ApiClient, *, timeout_seconds: int = 300) -> None:
        """Follow the virtual nodes in the background (until :meth:`stop`)."""
        self.cache.start(api, timeout_seconds=timeout_seconds)

    async def stop(self) -> None:
        await self.cache.stop()
