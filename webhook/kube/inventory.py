"""The fleet inventory: every Karmada ``Cluster`` the API server holds, in memory.

Readers call :meth:`FleetInventory.clusters` (synchronous, never waits on the API server);
a background :class:`~webhook.kube.watch.ListWatch` keeps it current, so a Cluster added,
relabelled or removed shows within seconds. What a Cluster object means is decided by the
pure :func:`webhook.decision.fleet.entry`; a malformed object is skipped with one warning
(again only if its problem changes). When the API server cannot be reached the inventory
keeps its last state and :attr:`~FleetInventory.synced` turns False.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import structlog
from kubernetes_asyncio import client

from webhook.decision.fleet import ClusterEntry, ZoneSource, entry, name_of
from webhook.kube.watch import ListWatch
from webhook.model import vocabulary
from webhook.model.config import Config
from webhook.model.validation import InvalidInput
from webhook.runtime import metrics, tasks

log = structlog.get_logger("carbonshift.fleet")

GROUP, VERSION, PLURAL = "cluster.karmada.io", "v1alpha1", "clusters"
SOURCES: tuple[ZoneSource, ...] = ("label", "annotation", "config", "region-table", "unknown")


class FleetInventory:
    """Karmada member clusters by name, with their grid zones."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self._entries: dict[str, ClusterEntry] = {}
        self._skipped: dict[str, str] = {}
        self._view: Mapping[str, ClusterEntry] = MappingProxyType({})
        self._watch: ListWatch | None = None
        self._task: asyncio.Task[None] | None = None

    # --- reading (synchronous) -----------------------------------------------------------

    def clusters(self) -> Mapping[str, ClusterEntry]:
        """Every usable Cluster by name (a read-only snapshot; replaced on each change)."""
        return self._view

    def skipped(self) -> Mapping[str, str]:
        """Malformed Cluster objects left out, by name: why."""
        return dict(self._skipped)

    @property
    def synced(self) -> bool:
        """Listed from the API server and following its watch right now."""
        return self._watch is not None and self._watch.synced

    # --- updating (called by the watch; usable on their own) ------------------------------

    def replace(self, objects: Sequence[Mapping[str, Any]]) -> None:
        """A full list: the objects are the fleet (anything not listed is gone)."""
        self._entries.clear()
        kept = dict(self._skipped)
        self._skipped.clear()
        for obj in objects:
            self._take(obj, kept.get(name_of(obj)))
        self._publish()

    def event(self, kind: str, obj: Mapping[str, Any]) -> None:
        """One watch event: ``ADDED``, ``MODIFIED`` or ``DELETED``."""
        name = name_of(obj)
        before = self._entries.get(name)
        if kind == "DELETED":
            self._entries.pop(name, None)
            self._skipped.pop(name, None)
        else:
            self._take(obj, self._skipped.pop(name, None))
            if before is not None and self._entries.get(name) == before:
                return  # e.g. a status heartbeat: what placement reads is unchanged
        self._publish()

    def _take(self, obj: Mapping[str, Any], known_problem: str | None) -> None:
        name = name_of(obj)
        try:
            got = entry(obj, self.config)
        except InvalidInput as exc:
            self._entries.pop(name, None)
            self._skipped[name] = str(exc)
            if str(exc) != known_problem:
                log.warning("cluster_skipped", cluster=name, problem=str(exc))
            return
        for problem in got.problems:
            if self._entries.get(name) is None or problem not in self._entries[name].problems:
                log.warning("cluster_value_ignored", cluster=name, problem=str(problem))
        if got.grid_zone is None:
            previous = self._entries.get(name)
            if previous is None or previous.grid_zone is not None:
                log.warning(
                    "cluster_zone_unknown",
                    cluster=name,
                    provider=got.provider,
                    region=got.region,
                    hint=f"label the Cluster {vocabulary.ZONE}=<zone> or add clusters.{name}",
                )
        self._entries[name] = got

    def _publish(self) -> None:
        self._view = MappingProxyType(dict(self._entries))
        counts = Counter(e.zone_source for e in self._entries.values())
        for source in SOURCES:
            metrics.FLEET_CLUSTERS.labels(source).set(counts.get(source, 0))
        metrics.FLEET_SKIPPED.set(len(self._skipped))

    # --- running --------------------------------------------------------------------------

    def start(self, api: client.ApiClient, *, timeout_seconds: int = 300) -> None:
        """Follow the API server in the background (until :meth:`stop`)."""
        self._watch = ListWatch(
            api,
            GROUP,
            VERSION,
            PLURAL,
            on_list=self.replace,
            on_event=self.event,
            timeout_seconds=timeout_seconds,
        )
        self._task = asyncio.create_task(self._run(self._watch), name="fleet-inventory")

    async def _run(self, watch: ListWatch) -> None:
        synced = asyncio.create_task(self._report_synced(watch))
        try:
            await watch.run()
        finally:
            synced.cancel()
            metrics.FLEET_SYNCED.set(0)

    async def _report_synced(self, watch: ListWatch) -> None:
        while True:
            metrics.FLEET_SYNCED.set(1 if watch.synced else 0)
            await asyncio.sleep(1.0)

    async def stop(self) -> None:
        await tasks.cancel(self._task)
        self._task = None
