"""Liqo's virtual nodes (the remote clusters this cluster offloads to), in memory.

Readers call :meth:`PeerInventory.clusters` (synchronous; keyed by the virtual node's
name, each a :class:`~webhook.decision.liqo.Peer` with the remote cluster's id and grid
zone). A background :class:`~webhook.kube.watch.ListWatch` of the Nodes labelled
``liqo.io/type=virtual-node`` keeps it current; what a Node means is decided by the pure
:func:`webhook.decision.liqo.peer`. A cluster without Liqo simply has no virtual nodes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import structlog
from kubernetes_asyncio import client

from webhook.decision.liqo import SELECTOR, Peer, peer, place
from webhook.kube.watch import ListWatch
from webhook.model import vocabulary
from webhook.model.config import ClusterConfig, Config
from webhook.model.objects import meta_of
from webhook.model.validation import InvalidInput
from webhook.runtime import tasks

log = structlog.get_logger("carbonshift.peers")


class _VirtualNodes:
    """The virtual Nodes, listed and watched through ``ListWatch``'s custom-object call."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self.core = client.CoreV1Api(api)

    async def list_cluster_custom_object(self, *_resource: str, **options: Any) -> Any:
        answer = await self.core.list_node(label_selector=SELECTOR, **options)
        if options.get("watch"):
            return answer  # the raw stream the watch reads
        return self.api.sanitize_for_serialization(answer)


class PeerInventory:
    """Liqo virtual nodes by node name, with their remote clusters' grid zones."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self._peers: dict[str, Peer] = {}
        self._view: Mapping[str, Peer] = MappingProxyType({})
        self._places: tuple[object, Mapping[str, ClusterConfig]] = (None, MappingProxyType({}))
        self._watch: ListWatch | None = None
        self._task: asyncio.Task[None] | None = None

    def clusters(self) -> Mapping[str, Peer]:
        """Every virtual node by name (a read-only snapshot; replaced on each change)."""
        return self._view

    def by_cluster_id(self) -> Mapping[str, Peer]:
        """The same peers by remote cluster id (one virtual node per remote cluster)."""
        return {p.cluster_id: p for _, p in sorted(self._view.items())}

    def places(self) -> Mapping[str, ClusterConfig]:
        """The remote clusters by id as decisions read them (:func:`liqo.place`); the same
        mapping object until the virtual nodes change."""
        view = self._view
        if self._places[0] is not view:
            places = {i: place(p) for i, p in self.by_cluster_id().items()}
            self._places = (view, MappingProxyType(places))
        return self._places[1]

    @property
    def synced(self) -> bool:
        return self._watch is not None and self._watch.synced

    def replace(self, objects: Sequence[Mapping[str, Any]]) -> None:
        """A full list of the virtual nodes."""
        self._peers.clear()
        for obj in objects:
            self._take(obj)
        self._view = MappingProxyType(dict(self._peers))

    def event(self, kind: str, obj: Mapping[str, Any]) -> None:
        """One watch event on a virtual node."""
        name = meta_of(obj).name
        if not name:
            return
        before = self._peers.get(name)
        if kind == "DELETED":
            self._peers.pop(name, None)
        else:
            self._take(obj)
            if before is not None and self._peers.get(name) == before:
                return  # a heartbeat: nothing zone resolution reads changed
        self._view = MappingProxyType(dict(self._peers))

    def _take(self, obj: Mapping[str, Any]) -> None:
        try:
            found = peer(obj, self.config)
        except InvalidInput as exc:
            log.warning("virtual_node_skipped", problem=str(exc))
            return
        previous = self._peers.get(found.node)
        for problem in found.problems:
            log.warning("virtual_node_value_ignored", node=found.node, problem=str(problem))
        if found.grid_zone is None and (previous is None or previous.grid_zone is not None):
            log.warning(
                "virtual_node_zone_unknown",
                node=found.node,
                cluster_id=found.cluster_id,
                hint=f"declare {vocabulary.ZONE}=<zone> in the provider's --cluster-labels "
                f"or add clusters.{found.cluster_id}",
            )
        self._peers[found.node] = found

    def start(self, api: client.ApiClient, *, timeout_seconds: int = 300) -> None:
        """Follow the virtual nodes in the background (until :meth:`stop`)."""
        self._watch = ListWatch(
            api,
            "",
            "v1",
            "nodes",
            on_list=self.replace,
            on_event=self.event,
            timeout_seconds=timeout_seconds,
            objects=_VirtualNodes(api),
        )
        self._task = asyncio.create_task(self._watch.run(), name="liqo-peers")

    async def stop(self) -> None:
        await tasks.cancel(self._task)
        self._task = None
