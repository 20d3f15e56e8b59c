"""The fleet inventory: every Karmada ``Cluster`` the API server holds, in memory.

Readers call :meth:`FleetInventory.clusters` (synchronous, never waits on the API server);
a background :class:`~webhook.kube.watch.ListWatch` keeps it current, so a Cluster added,
relabelled or removed shows within seconds. What a Cluster object means is decided by the
pure :func:`webhook.decision.fleet.entry`; a malformed object is skipped with one warning
(again only if its problem changes). When the API server cannot be reached the inventory
keeps its last state and :attr:`~FleetInventory.synced` turns False.

:attr:`FleetInventory.rooms` grows whenever a Cluster's ``status.resourceSummary`` (its
room) changes: the leader's rebalancer looks again then, not only on its interval.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
import structlog
from kubernetes_asyncio import client

from webhook.decision.fleet import ClusterEntry, ZoneSource, entry
from webhook.decision.karmada.bindings import CLUSTERS
from webhook.kube.cache import WatchedCache
from webhook.model import vocabulary
from webhook.model.config import Config
from webhook.model.objects import dig
from webhook.runtime import metrics, tasks

log = structlog.get_logger("carbonshift.fleet")

SOURCES: tuple[ZoneSource, ...] = ("label", "annotation", "config", "region-table", "unknown")


class FleetInventory:
    """Karmada member clusters by name, with their grid zones (a :class:`WatchedCache`)."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.cache: WatchedCache[ClusterEntry] = WatchedCache(
            CLUSTERS, self._decode, kind="cluster", on_change=self._count
        )
        self._task: asyncio.Task[None] | None = None
        self._room: dict[str, int] = {}
        self.rooms = 0
        """Grows whenever a Cluster's resource summary (its room) changes."""

    # --- reading (synchronous) -----------------------------------------------------------

    def clusters(self) -> Mapping[str, ClusterEntry]:
        """Every usable Cluster by name (a read-only snapshot; replaced on each change)."""
        return self.cache.items()

    def skipped(self) -> Mapping[str, str]:
        """Malformed Cluster objects left out, by name: why."""
        return self.cache.skipped()

    @property
    def synced(self) -> bool:
        """Listed from the API server and following its watch right now."""
        return self.cache.synced

    # --- updating (called by the watch; usable on their own) ------------------------------

    def replace(self, objects: Sequence[Mapping[str, Any]]) -> None:
        """A full list: the objects are the fleet (anything not listed is gone)."""
        self.cache.replace(objects)

    def event(self, kind: str, obj: Mapping[str, Any]) -> None:
        """One watch event: ``ADDED``, ``MODIFIED`` or ``DELETED``."""
        self.cache.event(kind, obj)

    def _decode(self, obj: Mapping[str, Any], previous: ClusterEntry | None) -> ClusterEntry:
        got = entry(obj, self.config)
        name = got.name
        summary = dig(obj, "status", "resourceSummary")
        room = hash(orjson.dumps(summary, option=orjson.OPT_SORT_KEYS)) if summary else 0
        if self._room.get(name) != room:
            self._room[name] = room
            self.rooms += 1
        for problem in got.problems:
            if previous is None or problem not in previous.problems:
                log.warning("cluster_value_ignored", cluster=name, problem=str(problem))
        if got.grid_zone is None and (previous is None or previous.grid_zone is not None):
            log.warning(
                "cluster_zone_unknown",
                cluster=name,
                provider=got.provider,
                region=got.region,
                hint=f"label the Cluster {vocabulary.ZONE}=<zone> or add clusters.{name}",
            )
        return got

    def _count(self, view: Mapping[str, ClusterEntry]) -> None:
        counts = Counter(e.zone_source for e in view.values())
        for source in SOURCES:
            metrics.FLEET_CLUSTERS.labels(source).set(counts.get(source, 0))
        metrics.FLEET_SKIPPED.set(len(self.cache.skipped()))

    # --- running --------------------------------------------------------------------------

    def start(self, api: client.ApiClient, *, timeout_seconds: int = 300) -> None:
        """Follow the API server in the background (until :meth:`stop`)."""
        self.cache.start(api, timeout_seconds=timeout_seconds)
        self._task = asyncio.create_task(self._report_synced(), name="fleet-inventory-synced")

    async def _report_synced(self) -> None:
        try:
            while True:
                metrics.FLEET_SYNCED.set(1 if self.cache.synced else 0)
                await asyncio.sleep(1.0)
        finally:
            metrics.FLEET_SYNCED.set(0)

    async def stop(self) -> None:
        await tasks.cancel(self._task)
        self._task = None
        await self.cache.stop()
