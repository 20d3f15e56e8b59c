"""The leader keeps ``carbonshift.io/intensity`` and its annotations on every Karmada Cluster
(and, with :data:`NODES`, on every Liqo virtual node: the remote cluster it stands for).

A pass runs after every feed refresh (the snapshot's generation moved), every change of
the fleet inventory, on becoming leader, and at least every ``labels.interval_seconds``.
For each Cluster with a grid zone it asks the feed to keep that zone warm, decides with
the pure :func:`webhook.decision.labels.decide` and, when the wanted label or annotations
differ from what the Cluster carries, writes them by server-side apply with field manager
``carbonshift``: only ``carbonshift.io/*`` keys are ever sent, so other managers' labels
and annotations are untouched. A class change also records an Event saying why.

Only the Lease holder writes: every write checks the elector right before it is sent
(:class:`~webhook.kube.writes.NotLeader` ends the pass at once), and what this replica
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

from webhook.controllers.runner import Controller
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


class ClusterLabeler(Controller):
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
        self._held: dict[str, Held] = {}
        self._gaps: set[str] = set()
        """Clusters whose zone has had no data since the Event that said so."""
        self._seen: tuple[int, int] | None = None
        """The inputs of the last pass (:meth:`_inputs`): a pass runs again as they change."""

    # --- one pass -------------------------------------------------------------------------

    async def reconcile(self) -> int:
        """Bring every Cluster's label and annotations up to date; the number written."""
        self._seen = self._inputs()
        clusters = self.inventory.clusters()
        for gone in set(self._held) - set(clusters):
            del self._held[gone]
        for cluster in clusters.values():
            if cluster.grid_zone is not None:
                self.feed.want(cluster.grid_zone)
        table = self.feed.snapshot().table
        written = 0
        for name, cluster in sorted(clusters.items()):
            if not self.gate.leading:
                break
            if cluster.grid_zone is None:
                continue
            reading = await self._reading(name, cluster.grid_zone, table)
            if reading is None:
                continue  # no data, or stale: stale data never changes a label
            try:
                held = self._held.get(name)
                label = cluster.labels.get(vocabulary.INTENSITY_CLASS)
                if held is not None and held.labels.get(vocabulary.INTENSITY_CLASS) != label:
                    del self._held[name]  # changed by someone else: read it again
                written += await self._label(name, reading)
            except NotLeader:
                break
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                metrics.CLUSTER_LABEL_WRITES.labels("failed").inc()
                self._held.pop(name, None)  # read it again next pass
                if not refused(exc, "patch", self.resource.name):
                    log.warning(
                        "cluster_label_failed",
                        kind=self.resource.kind,
                        cluster=name,
                        error=error_name(exc),
                    )
        return written

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

    def _inputs(self) -> tuple[int, int]:
        """What a pass reads: the feed's snapshot and the inventory's view (identities)."""
        return self.feed.snapshot().generation, id(self.inventory.clusters())

    def changed(self) -> bool:
        return self._inputs() != self._seen

    def lost(self) -> None:
        self._held.clear()  # a new term reads the Clusters again
        self._seen = None
