"""The leader keeps ``carbonshift.io/intensity`` and its annotations on every Karmada Cluster
(and, with :data:`NODES`, on every Liqo virtual node: the remote cluster it stands for).

A keyed controller (:class:`~webhook.controllers.runner.KeyedController`): one Cluster per
``reconcile``. A term starts once the inventory has synced, with every Cluster queued once;
after that a Cluster is queued when its inventory entry changes (it joins, its labels or
zone change) or a feed refresh changes its zone's reading, and again every
``labels.interval_seconds`` as a safety net. For the Cluster it asks the feed to keep its
zone warm, decides with the pure :func:`webhook.decision.labels.decide` and, when the
wanted label or annotations differ from what the Cluster carries, writes them by
server-side apply with field manager ``carbonshift``: only ``carbonshift.io/*`` keys are
ever sent, so other managers' labels and annotations are untouched. A class change also
records an Event saying why.

Only the Lease holder writes: every write checks the elector right before it is sent
(:class:`~webhook.kube.writes.NotLeader` ends the reconcile at once), and what this replica
remembers of the Clusters is forgotten when it stops leading. A Cluster seen for the first
time in a leadership term is read once (its annotations hold the time of the last class
change, so the minimum interval survives a change of leader).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import structlog
from kubernetes_asyncio import client

from webhook.controllers.runner import KeyedController, Retry
from webhook.decision.karmada.bindings import CLUSTERS
from webhook.decision.labels import Current, Rule, decide
from webhook.kube.client import REQUEST_TIMEOUT, error_name, refused
from webhook.kube.events import EventRecorder
from webhook.kube.writes import Gate, NotLeader, apply_metadata
from webhook.model import vocabulary
from webhook.model.config import Config
from webhook.model.intensity import IntensityTable, Reading, utcnow
from webhook.model.objects import meta_of
from webhook.model.resources import Resource
from webhook.runtime import metrics
from webhook.runtime.workqueue import WorkQueue

if TYPE_CHECKING:
    import datetime

    from webhook.feed import IntensityFeed

log = structlog.get_logger("carbonshift.labels")


async def read(api: client.ApiClient, resource: Resource, name: str) -> Mapping[str, Any]:
    """One object of a cluster-scoped kind the labeler labels (a Node in the core API)."""
    if not resource.group:
        node = await client.CoreV1Api(api).read_node(name, _request_timeout=REQUEST_TIMEOUT)
        found: Mapping[str, Any] = api.sanitize_for_serialization(node)
        return found
    objects = client.CustomObjectsApi(api)
    return await objects.get_cluster_custom_object(  # type: ignore[no-any-return]
        resource.group, resource.version, resource.plural, name, _request_timeout=REQUEST_TIMEOUT
    )


NODES = Resource("", "v1", "nodes", "Node")
"""Liqo virtual nodes (:class:`~webhook.kube.peers.PeerInventory`)."""


class Place(Protocol):
    """What the labeler reads of an inventory entry."""

    @property
    def labels(self) -> Mapping[str, str]: ...
    @property
    def grid_zone(self) -> str | None: ...


class Places(Protocol):
    """An inventory: the places to label by object name."""

    def clusters(self) -> Mapping[str, Place]: ...
    @property
    def synced(self) -> bool:
        """Listed from the API server (a term starts then)."""
        ...


OWNED = (
    vocabulary.INTENSITY_VALUE,
    vocabulary.INTENSITY_ZONE,
    vocabulary.INTENSITY_SOURCE,
    vocabulary.INTENSITY_TIME,
    vocabulary.INTENSITY_SINCE,
)
"""The annotations carbonshift writes on a Cluster."""


@dataclasses.dataclass(frozen=True, slots=True)
class Held:
    """What a Cluster carries of ours (as last read or written)."""

    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    uid: str | None = None

    @property
    def current(self) -> Current:
        return Current.read(self.labels, self.annotations)


def _ours(obj: Mapping[str, Any]) -> Held:
    meta = meta_of(obj)
    return Held(
        {k: v for k, v in meta.labels.items() if k == vocabulary.INTENSITY_CLASS},
        {k: v for k, v in meta.annotations.items() if k in OWNED},
        meta.uid or None,
    )


MISSING = "IntensityDataMissing"


class ClusterLabeler(KeyedController[str]):
    """Writes each Cluster's intensity class label and annotations while leading."""

    def __init__(
        self,
        api: client.ApiClient,
        config: Config,
        inventory: Places,
        feed: IntensityFeed,
        gate: Gate,
        *,
        events: EventRecorder | None = None,
        clock: Callable[[], datetime.datetime] = utcnow,
        resource: Resource = CLUSTERS,
    ) -> None:
        self.api = api
        self.resource = resource
        self.name = f"{resource.kind.lower()}_labels"
        self.inventory = inventory
        self.feed = feed
        self.gate = gate
        self.events = events
        self.rule = Rule.of(config)
        self.interval = config.labels.interval_seconds
        self.clock = clock
        self.queue = WorkQueue()
        self.written = 0
        """Clusters written since the replica started (for tests)."""
        self._held: dict[str, Held] = {}
        self._gaps: set[str] = set()
        """Clusters whose zone has had no data since the Event that said so."""
        self._seen: tuple[Mapping[str, Place], IntensityTable] | None = None
        """The inventory's view and the feed's table :meth:`poll` last looked at."""

    # --- what is queued -------------------------------------------------------------------

    def synced(self) -> bool:
        return self.inventory.synced

    def keys(self) -> list[str]:
        return sorted(self.inventory.clusters())

    def poll(self) -> None:
        """Queue the Clusters whose inventory entry changed (joined, relabelled, gone) or
        whose zone's reading a feed refresh changed."""
        clusters, table = self.inventory.clusters(), self.feed.snapshot().table
        if self._seen is None:
            self._seen = (clusters, table)
            return
        before, read = self._seen
        if clusters is before and table is read:
            return
        self._seen = (clusters, table)
        changed = {n for n in before.keys() | clusters.keys() if before.get(n) != clusters.get(n)}
        zones = {z for z in read.keys() | table.keys() if read.get(z) != table.get(z)}
        if zones:
            changed.update(n for n, c in clusters.items() if c.grid_zone in zones)
        self.enqueue(sorted(changed))

    def lost(self) -> None:
        self._held.clear()  # a new term reads the Clusters again
        self._seen = None

    async def sync(self) -> int:
        """Every Cluster reconciled once, as a term's first sync does (tests, the CLI);
        the number written."""
        before = self.written
        await self.reconcile_all()
        return self.written - before

    # --- one Cluster ----------------------------------------------------------------------

    async def reconcile(self, key: str) -> float | None:
        """Bring ``key``'s label and annotations up to date; seconds until it is looked at
        again (``labels.interval_seconds``, the safety net), None when it is gone."""
        cluster = self.inventory.clusters().get(key)
        if cluster is None:
            self._held.pop(key, None)
            self._gaps.discard(key)
            return None
        if cluster.grid_zone is None:
            return self.interval
        self.feed.want(cluster.grid_zone)
        reading = await self._reading(key, cluster.grid_zone, self.feed.snapshot().table)
        if reading is None:
            return self.interval  # no data, or stale: stale data never changes a label
        try:
            held = self._held.get(key)
            label = cluster.labels.get(vocabulary.INTENSITY_CLASS)
            if held is not None and held.labels.get(vocabulary.INTENSITY_CLASS) != label:
                del self._held[key]  # changed by someone else: read it again
            self.written += await self._label(key, reading)
        except NotLeader:
            return None  # the term ends: the next one queues every Cluster
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            metrics.CLUSTER_LABEL_WRITES.labels("failed").inc()
            self._held.pop(key, None)  # read it again when retried
            if not refused(exc, "patch", self.resource.name):
                log.warning(
                    "cluster_label_failed",
                    kind=self.resource.kind,
                    cluster=key,
                    error=error_name(exc),
                )
            raise Retry from exc
        return self.interval

    async def _reading(self, name: str, zone: str, table: IntensityTable) -> Reading | None:
        """The fresh reading a Cluster is labelled from; a zone without data is said once
        per spell (:meth:`_missing`)."""
        reading = table.get(zone)
        if reading is None:
            await self._missing(name, zone)
            return None
        self._gaps.discard(name)
        return None if reading.stale else reading

    async def _missing(self, name: str, zone: str) -> None:
        """One Warning Event ``IntensityDataMissing`` on the Cluster per spell without data
        for its zone (a misspelt zone, or every provider failing for it)."""
        if name in self._gaps or self.events is None or not self.gate.leading:
            return
        self._gaps.add(name)
        try:
            obj = await read(self.api, self.resource, name)
            await self.events.emit(
                {
                    "apiVersion": self.resource.api_version,
                    "kind": self.resource.kind,
                    "metadata": {"name": name, "uid": meta_of(obj).uid or None},
                },
                reason=MISSING,
                note=f"no carbon intensity data for grid zone {zone}: the cluster ranks last "
                "and keeps its label until a provider answers for it",
                action="Rank",
                type="Warning",
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._gaps.discard(name)  # say it on a later pass
            log.warning("cluster_event_failed", cluster=name, error=error_name(exc))

    async def _label(self, name: str, reading: Reading) -> int:
        held = self._held.get(name)
        if held is None:
            held = self._held[name] = _ours(await read(self.api, self.resource, name))
        marks = decide(held.current, reading, self.rule, self.clock())
        if marks.klass is None or marks.annotations is None:
            return 0
        labels, annotations = marks.labels(), dict(marks.annotations)
        if labels == held.labels and annotations == held.annotations:
            return 0
        if not self.gate.leading:
            raise NotLeader("not leading")
        stored = await apply_metadata(
            self.api,
            self.gate,
            self.resource,
            name=name,
            labels=labels,
            annotations=annotations,
        )
        self._held[name] = _ours(stored)
        metrics.CLUSTER_LABEL_WRITES.labels("written").inc()
        if marks.changed:
            metrics.CLUSTER_CLASS_CHANGES.labels(marks.klass).inc()
            log.info(
                "cluster_class_changed",
                kind=self.resource.kind,
                cluster=name,
                to=marks.klass,
                reason=marks.reason,
            )
            if self.events is not None:
                await self.events.emit(
                    {
                        "apiVersion": self.resource.api_version,
                        "kind": self.resource.kind,
                        "metadata": {"name": name, "uid": self._held[name].uid},
                    },
                    reason="IntensityClassChanged",
                    note=f"{vocabulary.INTENSITY_CLASS}={marks.klass}: {marks.reason}",
                    action="Label",
                )
        return 1

    def describe(self) -> dict[str, Any]:
        return {"kind": self.resource.kind}
