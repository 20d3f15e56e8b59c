"""The leader's Open Cluster Management scores: one ``AddOnPlacementScore`` per ManagedCluster.

A keyed controller (:class:`~webhook.controllers.runner.KeyedController`): the key is a
ManagedCluster's name. Two watched caches follow the ManagedClusters
(``cluster.open-cluster-management.io/v1``, each resolved to its grid zone by
:func:`webhook.decision.ocm.managed_cluster`) and the AddOnPlacementScores named
``carbon`` in every namespace; a change to either queues that cluster, and a feed refresh
queues the clusters whose zone's reading or forecast changed. Reconciling a cluster
writes its scores when they are due (:func:`webhook.decision.ocm.due`: a value moved
beyond ``hysteresis.margin``, a score is missing, ``validUntil`` about to lapse): server-side
apply of the object (created when missing) and of its ``status`` (the scores and
``validUntil``), field manager ``carbonshift``. The cluster comes back when its
``validUntil`` is due for renewal, and every ``ocm.interval_seconds`` as a safety net
(from memory: no API call unless a write is due). The namespace is the ManagedCluster's
own (OCM's registration controller creates it); a cluster without one is skipped with a
warning. An API server without OCM's CRDs has nothing to score.

Scores are written only by the leader: each write checks the Lease right before it is
sent. A zone the feed does not hold yet is asked for (``want``) and scored once the feed
has it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

import structlog
from kubernetes_asyncio import client
from kubernetes_asyncio.client.rest import ApiException

from webhook.controllers.runner import Feed, KeyedController
from webhook.decision import ocm
from webhook.decision.fleet import ClusterEntry
from webhook.kinds.reevaluation import Reevaluation
from webhook.kube.cache import WatchedCache
from webhook.kube.client import error_name, refused
from webhook.kube.writes import Gate, apply_options
from webhook.model import vocabulary
from webhook.model.config import Config
from webhook.model.intensity import Reading, utcnow
from webhook.model.objects import meta_of
from webhook.runtime import metrics
from webhook.runtime.workqueue import WorkQueue

log = structlog.get_logger("carbonshift.ocm")

Published = tuple[str, "ocm.Scores | None"]
"""A ``carbon`` AddOnPlacementScore as the cache holds it: its resourceVersion and scores."""
SETTLE_SECONDS = 0.2
"""How soon a cluster is looked at again while the cache lags the scores just written."""
EXPECT_SECONDS = 5.0
"""How long to wait for the cache to show them before deciding on what it shows."""

Obj = dict[str, Any]


class PlacementScorer(KeyedController[str]):
    """Keeps the ``carbon`` AddOnPlacementScore of every ManagedCluster while leading."""

    name = "ocm_scores"

    def __init__(
        self,
        api: client.ApiClient,
        config: Config,
        feed: Feed,
        gate: Gate,
        *,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.api = api
        self.objects = client.CustomObjectsApi(api)
        self.config = config
        self.feed = feed
        self.gate = gate
        self.clock = clock
        self.interval = config.ocm.interval_seconds
        self.rules = Reevaluation(config, feed.outlook)
        self.max_age = timedelta(seconds=config.feed.max_age_seconds)
        self.renew = timedelta(seconds=2 * self.interval + 60)
        """A published ``validUntil`` this close is renewed (two passes and a minute)."""
        self.clusters: WatchedCache[ClusterEntry] = WatchedCache(
            ocm.CLUSTERS, self._cluster, kind="managed_cluster", on_keys=self.enqueue
        )
        self.published: WatchedCache[Published] = WatchedCache(
            ocm.SCORES,
            lambda obj, _before: (meta_of(obj).resource_version, ocm.published(obj)),
            kind="placement_score",
            field_selector=f"metadata.name={ocm.RESOURCE}",
            on_keys=lambda keys: self.enqueue(k.partition("/")[0] for k in keys),
        )
        self.caches = (self.clusters, self.published)
        self.queue = WorkQueue()
        self._generation: int | None = None
        self._inputs: dict[str, tuple[Reading | None, Reading | None]] = {}
        """Zone -> the reading and forecast mean its clusters were last queued for."""
        self._expected: dict[str, tuple[str, float]] = {}
        """Cluster -> the resourceVersion of the scores just written and until when to wait
        for the cache to show it (it lags the write: deciding meanwhile would write again)."""

    def keys(self) -> list[str]:
        return list(self.clusters.items())

    def poll(self) -> None:
        """After a feed refresh, queue the clusters whose zone's inputs changed."""
        snapshot = self.feed.snapshot()
        if snapshot.generation == self._generation:
            return
        self._generation = snapshot.generation
        by_zone: dict[str, list[str]] = {}
        for name, cluster in self.clusters.items().items():
            if cluster.grid_zone:
                by_zone.setdefault(cluster.grid_zone, []).append(name)
        ranked = self.rules.ranked_zones(snapshot.table, sorted(by_zone))
        inputs = {z: (snapshot.table.get(z), ranked.get(z)) for z in by_zone}
        for zone, names in by_zone.items():
            if inputs[zone] != self._inputs.get(zone):
                self.enqueue(names)
        self._inputs = inputs

    def lost(self) -> None:
        self._generation = None
        self._inputs = {}
        self._expected = {}

    # --- one cluster ----------------------------------------------------------------------

    async def reconcile(self, key: str) -> float | None:
        """Write ``key``'s scores when they are due; seconds until it is looked at again."""
        cluster = self.clusters.get(key)
        if cluster is None:
            return None  # gone: OCM deletes its namespace, scores and all
        zone = cluster.grid_zone
        if zone is None:
            return self.interval
        self.feed.want(zone)
        table = self.feed.snapshot().table
        ranked = self.rules.ranked_zones(table, [zone])
        new = ocm.scores(table.get(zone), ranked.get(zone), self.max_age)
        if new is None:
            return self.interval  # the feed has no reading yet: its refresh queues it
        held = self.published.get(f"{key}/{ocm.RESOURCE}")
        if (expected := self._expected.get(key)) is not None:
            version, until = expected
            if (held is None or held[0] != version) and time.monotonic() < until:
                return SETTLE_SECONDS  # the cache has not seen the last write yet
            del self._expected[key]
        before = held[1] if held is not None else None
        now = self.clock()
        if ocm.due(before, new, margin=self.config.hysteresis.margin, now=now, renew=self.renew):
            if not self.gate.leading:
                return self.interval
            written = await self._write(key, new)
            if written is None:
                return self.interval
            self._expected[key] = (written, time.monotonic() + EXPECT_SECONDS)
            log.info(
                "ocm_scores_written",
                cluster=key,
                zone=zone,
                scores=dict(new.values),
                before=dict(before.values) if before else None,
                valid_until=vocabulary.format_time(new.valid_until) if new.valid_until else None,
            )
            before = new
        return self._next(before, now)

    def _next(self, held: ocm.Scores | None, now: datetime) -> float:
        """Seconds until the published ``validUntil`` is due for renewal, at most
        ``ocm.interval_seconds`` (the safety net)."""
        if held is None or held.valid_until is None:
            return self.interval
        renewal = (held.valid_until - self.renew - now).total_seconds()
        return max(1.0, min(self.interval, renewal))

    def _cluster(self, obj: Mapping[str, Any], before: ClusterEntry | None) -> ClusterEntry:
        """A ManagedCluster as the cache holds it; its problems logged when they change."""
        found = ocm.managed_cluster(obj, self.config)
        if before is None or before.problems != found.problems:
            for problem in found.problems:
                log.warning(
                    "managed_cluster_value_ignored", cluster=found.name, problem=str(problem)
                )
        if found.grid_zone is None and (before is None or before.grid_zone is not None):
            log.warning(
                "managed_cluster_zone_unknown",
                cluster=found.name,
                provider=found.provider,
                region=found.region,
                hint=f"label the ManagedCluster {vocabulary.ZONE}=<zone> or add "
                f"clusters.{found.name}",
            )
        return found

    # --- writing --------------------------------------------------------------------------

    async def _write(self, namespace: str, new: ocm.Scores) -> str | None:
        """Apply the object, then its status; the stored resourceVersion, or None (logged)
        when the API server refused."""
        group, version, plural = ocm.SCORES.group, ocm.SCORES.version, ocm.SCORES.plural
        resource = ocm.SCORES.name
        body = ocm.score_object(namespace)
        options = apply_options()
        try:
            await self.objects.patch_namespaced_custom_object(
                group, version, namespace, plural, ocm.RESOURCE, body, **options
            )
            if not self.gate.leading:
                return None
            stored = await self.objects.patch_namespaced_custom_object_status(
                group, version, namespace, plural, ocm.RESOURCE,
                {**body, "status": ocm.status(new)}, **options,
            )  # fmt: skip
        except ApiException as exc:
            metrics.KUBE_ERRORS.labels(resource, error_name(exc)).inc()
            if not refused(exc, "patch", resource):
                log.warning(
                    "ocm_scores_not_written",
                    cluster=namespace,
                    error=error_name(exc),
                    hint="the ManagedCluster's namespace must exist" if exc.status == 404 else None,
                )
            return None
        return meta_of(stored).resource_version

    def describe(self) -> dict[str, Any]:
        return {"resource": ocm.RESOURCE}
