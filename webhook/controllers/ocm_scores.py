"""The leader's Open Cluster Management scores: one ``AddOnPlacementScore`` per ManagedCluster.

Every ``ocm.interval_seconds`` while this replica leads, the leader lists the
ManagedClusters (``cluster.open-cluster-management.io/v1``) and the AddOnPlacementScores
named ``carbon``, resolves each cluster's grid zone (:func:`webhook.decision.ocm.managed_cluster`),
and for each whose scores are due (:func:`webhook.decision.ocm.due`: a value moved beyond
``hysteresis.margin``, a score is missing, ``validUntil`` about to lapse) writes them:
server-side apply of the object (created when missing) and of its ``status`` (the scores
and ``validUntil``), field manager ``carbonshift``. The namespace is the ManagedCluster's
own (OCM's registration controller creates it); a cluster without one is skipped with a
warning. An API server without OCM's CRDs has nothing to score.

Scores are written only by the leader: each write checks the Lease right before it is
sent. A zone the feed does not hold yet is asked for (``want``) and scored on a later pass.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import structlog
from kubernetes_asyncio import client
from kubernetes_asyncio.client.rest import ApiException

from webhook.controllers.runner import Controller, Feed
from webhook.decision import ocm
from webhook.decision.fleet import ClusterEntry
from webhook.kinds.following import Reevaluation
from webhook.kube.client import REQUEST_TIMEOUT, absent, error_name, refused
from webhook.kube.writes import Gate, apply_options
from webhook.model import vocabulary
from webhook.model.config import Config
from webhook.model.intensity import utcnow
from webhook.model.objects import items, meta_of
from webhook.model.validation import InvalidInput
from webhook.runtime import metrics

log = structlog.get_logger("carbonshift.ocm")

Obj = dict[str, Any]


class PlacementScorer(Controller):
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
        self._unknown: set[str] = set()

    # --- one pass -------------------------------------------------------------------------

    async def reconcile(self) -> int:
        """Score every ManagedCluster once; the number of AddOnPlacementScores written
        (none while this replica does not lead)."""
        listed = await self._list(*ocm.CLUSTERS)
        if listed is None:
            return 0
        clusters = self._clusters(listed)
        zones = sorted({z for c in clusters if (z := c.grid_zone)})
        for wanted in zones:
            self.feed.want(wanted)
        table = self.feed.snapshot().table
        ranked = self.rules.ranked_zones(table, zones)
        scores = await self._list(*ocm.SCORES, field_selector=f"metadata.name={ocm.RESOURCE}")
        held = {meta_of(o).namespace: o for o in items(scores)}
        now, margin = self.clock(), self.config.hysteresis.margin
        written = 0
        for cluster in clusters:
            zone = cluster.grid_zone
            new = ocm.scores(table.get(zone), ranked.get(zone), self.max_age) if zone else None
            if new is None:
                continue
            before = ocm.published(held.get(cluster.name))
            if not ocm.due(before, new, margin=margin, now=now, renew=self.renew):
                continue
            if not self.gate.leading:
                break
            if await self._write(cluster.name, new):
                written += 1
                log.info(
                    "ocm_scores_written",
                    cluster=cluster.name,
                    zone=zone,
                    scores=dict(new.values),
                    before=dict(before.values) if before else None,
                    valid_until=vocabulary.format_time(new.valid_until)
                    if new.valid_until
                    else None,
                )
        return written

    def _clusters(self, listed: list[Obj]) -> list[ClusterEntry]:
        out = []
        for obj in listed:
            try:
                found = ocm.managed_cluster(obj, self.config)
            except InvalidInput as exc:
                log.warning("managed_cluster_skipped", problem=str(exc))
                continue
            for problem in found.problems:
                log.warning(
                    "managed_cluster_value_ignored", cluster=found.name, problem=str(problem)
                )
            if found.grid_zone is None and found.name not in self._unknown:
                log.warning(
                    "managed_cluster_zone_unknown",
                    cluster=found.name,
                    provider=found.provider,
                    region=found.region,
                    hint=f"label the ManagedCluster {vocabulary.ZONE}=<zone> or add "
                    f"clusters.{found.name}",
                )
            if found.grid_zone is None:
                self._unknown.add(found.name)
            else:
                self._unknown.discard(found.name)
            out.append(found)
        return out

    # --- reading and writing --------------------------------------------------------------

    async def _list(
        self, group: str, version: str, plural: str, **options: Any
    ) -> list[Obj] | None:
        resource = f"{plural}.{group}"
        try:
            listed = await self.objects.list_cluster_custom_object(
                group, version, plural, _request_timeout=REQUEST_TIMEOUT, **options
            )
        except ApiException as exc:
            if not (refused(exc, "list", resource) or absent(exc, resource)):
                metrics.KUBE_ERRORS.labels(resource, error_name(exc)).inc()
                log.warning("ocm_list_failed", resource=resource, error=error_name(exc))
            return None
        return list(items(listed, "items"))

    async def _write(self, namespace: str, new: ocm.Scores) -> bool:
        """Apply the object, then its status; False (logged) when the API server refused."""
        group, version, plural = ocm.SCORES
        resource = f"{plural}.{group}"
        body = ocm.score_object(namespace)
        options = apply_options()
        try:
            await self.objects.patch_namespaced_custom_object(
                group, version, namespace, plural, ocm.RESOURCE, body, **options
            )
            if not self.gate.leading:
                return False
            await self.objects.patch_namespaced_custom_object_status(
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
            return False
        return True

    def describe(self) -> dict[str, Any]:
        return {"resource": ocm.RESOURCE}
