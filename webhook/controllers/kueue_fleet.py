"""What the Kueue controllers read of a MultiKueue manager, once per pass.

For a Workload on the manager: its ClusterQueue (``status.admission.clusterQueue``, else
the LocalQueue's), that queue's MultiKueue AdmissionCheck (``controllerName``
``kueue.x-k8s.io/multikueue``), the ``MultiKueueConfig`` the check's parameters name, and
for each of its clusters the ``MultiKueueCluster`` (grid zone: its label or annotation
``carbonshift.io/zone``, else ``clusters.<name>.zone`` of the config) and, on the worker
itself, the ClusterQueue its LocalQueue of the same namespace and name points to: the
quota and use :func:`webhook.decision.kueue.worker_of` reads. Also the owning Job's
annotations, and the feed's hourly outlook of a zone by the re-evaluation's forecast
method (``reevaluate.forecast``), with the current readings for zones without one.

Everything listed is held for one pass (:meth:`KueueReader.begin`); worker clients live
in :class:`webhook.kube.kueue.Workers`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import structlog
from kubernetes_asyncio import client

from webhook.controllers.runner import Controller, Feed
from webhook.decision import kueue as rules
from webhook.kinds.reevaluation import Reevaluation
from webhook.kube import kueue as kube
from webhook.kube.client import REQUEST_TIMEOUT, error_name
from webhook.kube.events import EventRecorder
from webhook.kube.writes import Gate
from webhook.model import vocabulary
from webhook.model.config import Config
from webhook.model.intensity import utcnow
from webhook.model.objects import condition, items, meta_of, strings, text
from webhook.model.vocabulary import DECISION
from webhook.runtime import metrics

log = structlog.get_logger("carbonshift.kueue")

Obj = dict[str, Any]
HOURS_AHEAD = 24
"""The longest outlook asked for (the feed's forecasts cover a day)."""


def zone_label(obj: Mapping[str, Any]) -> str | None:
    """A MultiKueueCluster's own ``carbonshift.io/zone`` (label, else annotation)."""
    meta = meta_of(obj)
    return meta.labels.get(vocabulary.ZONE) or meta.annotations.get(vocabulary.ZONE) or None


def decision_of(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The ``carbonshift.io/decision`` annotation, read back (empty when absent or not
    JSON)."""
    raw = meta_of(obj).annotations.get(DECISION)
    try:
        found = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def since_of(obj: Mapping[str, Any], key: str) -> datetime | None:
    """A time carbonshift recorded under ``key`` of the decision annotation."""
    raw = decision_of(obj).get(key)
    try:
        return vocabulary.parse_time(raw) if isinstance(raw, str) else None
    except ValueError:
        return None


async def namespace_labels(api: client.ApiClient) -> dict[str, Mapping[str, str]] | None:
    """Namespace -> its labels (None: the namespaces cannot be listed now)."""
    try:
        listed = await client.CoreV1Api(api).list_namespace(_request_timeout=REQUEST_TIMEOUT)
    except Exception as exc:
        metrics.KUBE_ERRORS.labels("namespaces", error_name(exc)).inc()
        return None
    return {ns.metadata.name: dict(strings(ns.metadata.labels)) for ns in listed.items}


def job_opted_out(job_labels: Mapping[str, str]) -> str | None:
    """Why carbon leaves a Workload alone for its Job's own label: ``carbonshift.io/enabled=
    false`` opts the Job out (as it does any object), even in a labelled namespace; None:
    it does not. (Kueue copies no label of the Job to its Workload unless told to.)"""
    if vocabulary.opt_in(job_labels) is False:
        return f"opted out (its Job is labelled {vocabulary.ENABLED}=false)"
    return None


def finished(workload: Mapping[str, Any]) -> bool:
    return condition(workload, "Finished") == "True" or bool(meta_of(workload).deletion_timestamp)


class KueueReader:
    """Reads the manager and its workers for the rules (see the module's docstring)."""

    def __init__(
        self, api: client.ApiClient, config: Config, feed: Feed, workers: kube.Workers
    ) -> None:
        self.api = api
        self.config = config
        self.feed = feed
        self.workers = workers
        self.rules = Reevaluation(config, feed.outlook)
        self.default_runtime = config.kueue.default_runtime_seconds
        self._pass: dict[str, list[Obj]] = {}
        self._worker_queues: dict[tuple[str, str, str], Obj | None] = {}

    async def begin(self) -> bool:
        """Start a pass: list what every Workload's reading needs, and ask the feed for every
        worker's zone; False when the manager's Kueue objects cannot be listed now."""
        self._pass, self._worker_queues = {}, {}
        for plural in (
            kube.CLUSTER_QUEUES, kube.ADMISSION_CHECKS, kube.MULTIKUEUE_CONFIGS,
            kube.MULTIKUEUE_CLUSTERS,
        ):  # fmt: skip
            found = await kube.listed(self.api, plural)
            if found is None:
                return False
            self._pass[plural] = found
        for cluster in self._pass[kube.MULTIKUEUE_CLUSTERS]:  # warm before Jobs need them
            zone = self.zone_of(meta_of(cluster).name)
            if zone:
                self.feed.want(zone)
        return True

    def _named(self, plural: str, name: str) -> Obj | None:
        return next((o for o in self._pass.get(plural, ()) if meta_of(o).name == name), None)

    # --- the manager ----------------------------------------------------------------------

    def cluster_queue_of(self, workload: Mapping[str, Any]) -> Obj | None:
        name = text(workload, "status", "admission", "clusterQueue")
        return self._named(kube.CLUSTER_QUEUES, name) if name else None

    def checks_of(self, cluster_queue: Mapping[str, Any]) -> list[Obj]:
        """The AdmissionChecks a ClusterQueue lists (both ways Kueue allows)."""
        strategy = items(cluster_queue, "spec", "admissionChecksStrategy", "admissionChecks")
        names = [text(c, "name") for c in strategy]
        names += [n for n in items(cluster_queue, "spec", "admissionChecks") if isinstance(n, str)]
        found = (self._named(kube.ADMISSION_CHECKS, n) for n in names if n)
        return [c for c in found if c is not None]

    def multikueue_config_of(self, workload: Mapping[str, Any]) -> Obj | None:
        """The MultiKueueConfig that dispatches ``workload`` (None: it is not MultiKueue's)."""
        queue = self.cluster_queue_of(workload)
        if queue is None:
            return None
        for check in self.checks_of(queue):
            if text(check, "spec", "controllerName") != kube.MULTIKUEUE_CONTROLLER:
                continue
            name = text(check, "spec", "parameters", "name")
            if text(check, "spec", "parameters", "kind") == "MultiKueueConfig" and name:
                return self._named(kube.MULTIKUEUE_CONFIGS, name)
        return None

    def multikueue_check(self, workload: Mapping[str, Any]) -> str | None:
        """The name of the MultiKueue AdmissionCheck on ``workload``'s ClusterQueue."""
        queue = self.cluster_queue_of(workload)
        for check in self.checks_of(queue) if queue is not None else ():
            if text(check, "spec", "controllerName") == kube.MULTIKUEUE_CONTROLLER:
                return meta_of(check).name
        return None

    def clusters_of(self, workload: Mapping[str, Any]) -> list[str] | None:
        """The clusters of the MultiKueueConfig that dispatches ``workload``, in its order
        (None: MultiKueue does not dispatch it)."""
        multikueue_config = self.multikueue_config_of(workload)
        if multikueue_config is None:
            return None
        return [n for n in items(multikueue_config, "spec", "clusters") if isinstance(n, str)]

    def active(self) -> set[str]:
        """The workers Kueue reaches: the MultiKueueClusters whose ``Active`` condition is
        True (what Kueue's own dispatchers nominate from)."""
        return {meta_of(c).name for c in self._pass.get(kube.MULTIKUEUE_CLUSTERS, ())
                if condition(c, "Active") == "True"}  # fmt: skip

    def zone_of(self, worker: str) -> str | None:
        """A worker's grid zone: its MultiKueueCluster's ``carbonshift.io/zone``, else the
        config's ``clusters.<name>``."""
        cluster = self._named(kube.MULTIKUEUE_CLUSTERS, worker)
        found = zone_label(cluster) if cluster is not None else None
        entry = self.config.clusters.get(worker)
        return found or (entry.grid_zone if entry is not None else None)

    def config_zones(self, multikueue_config: Mapping[str, Any]) -> dict[str, str | None]:
        """Worker -> grid zone, for the clusters of a MultiKueueConfig in its order."""
        names = [n for n in items(multikueue_config, "spec", "clusters") if isinstance(n, str)]
        return {n: self.zone_of(n) for n in names}

    # --- the workers -----------------------------------------------------------------------

    async def fleet(self, workload: Mapping[str, Any]) -> list[rules.Worker] | None:
        """The workers that may run ``workload`` with their quota and use (None: it is not
        dispatched by MultiKueue). A worker that cannot be read is left out."""
        multikueue_config = self.multikueue_config_of(workload)
        if multikueue_config is None:
            return None
        meta = meta_of(workload)
        queue_name = text(workload, "spec", "queueName")
        out = []
        for name, zone in self.config_zones(multikueue_config).items():
            queue = await self._worker_queue(name, meta.namespace, queue_name)
            if queue is not None:
                out.append(rules.worker_of(name, zone, queue))
        return out

    async def _worker_queue(self, worker: str, namespace: str, local_queue: str) -> Obj | None:
        key = (worker, namespace, local_queue)
        if key in self._worker_queues:
            return self._worker_queues[key]
        found: Obj | None = None
        cluster = self._named(kube.MULTIKUEUE_CLUSTERS, worker)
        api = await self.workers.client(cluster) if cluster is not None and local_queue else None
        if api is not None:
            local = await kube.get(api, kube.LOCAL_QUEUES, local_queue, namespace)
            queue_name = text(local, "spec", "clusterQueue") if local is not None else ""
            found = await kube.get(api, kube.CLUSTER_QUEUES, queue_name) if queue_name else None
        self._worker_queues[key] = found
        return found

    # --- the Job and the grid --------------------------------------------------------------

    async def job_metadata(
        self, workload: Mapping[str, Any]
    ) -> tuple[dict[str, str], dict[str, str]]:
        """The labels and the annotations of the Job owning ``workload`` (empty: no Job, or
        unreadable)."""
        meta = meta_of(workload)
        for owner in items(workload, "metadata", "ownerReferences"):
            if text(owner, "kind") != "Job" or not text(owner, "apiVersion").startswith("batch/"):
                continue
            try:
                job = await client.BatchV1Api(self.api).read_namespaced_job(
                    text(owner, "name"), meta.namespace, _request_timeout=REQUEST_TIMEOUT
                )
            except Exception:
                return {}, {}
            return dict(strings(job.metadata.labels)), dict(strings(job.metadata.annotations))
        return {}, {}

    def outlooks(
        self, zones: Iterable[str | None], hours: int
    ) -> tuple[dict[str, Sequence[float] | None], dict[str, float | None]]:
        """Zone -> the feed's hourly outlook ``[now, now+1 h, ...]`` over ``hours`` (by the
        re-evaluation's method; None without one), and zone -> current reading."""
        table = self.feed.snapshot().table
        outlooks: dict[str, Sequence[float] | None] = {}
        readings: dict[str, float | None] = {}
        method, outlook = self.rules.method, self.rules.outlook
        for zone in {z for z in zones if z}:
            self.feed.want(zone)
            horizon = max(1, min(HOURS_AHEAD, hours))
            outlooks[zone] = (
                outlook(zone, horizon, method) if method is not None and outlook else None
            )
            reading = table.get(zone)
            readings[zone] = reading.value if reading is not None and not reading.stale else None
        return outlooks, readings

    def job_of(
        self, workload: Mapping[str, Any], annotations: Mapping[str, str],
        default_max_delay: float | None = None,
    ) -> rules.Job:  # fmt: skip
        """:func:`webhook.decision.kueue.job_of` with the config's defaults (raises
        :class:`~webhook.model.validation.InvalidInput` for a malformed annotation)."""
        delay = default_max_delay
        if delay is None:
            delay = self.config.kueue.default_max_delay_seconds
        return rules.job_of(
            workload,
            annotations,
            default_runtime=timedelta(seconds=self.default_runtime),
            default_max_delay=None if delay is None else timedelta(seconds=delay),
        )


def in_flight(workloads: Iterable[Mapping[str, Any]], default_runtime: float) -> list[rules.Job]:
    """The manager's Workloads nominated to workers and admitted by none yet, as jobs (their
    requests are what :func:`webhook.decision.kueue.room` counts)."""
    out = []
    for workload in workloads:
        if not items(workload, "status", "nominatedClusterNames") or finished(workload):
            continue
        if text(workload, "status", "clusterName"):
            continue
        try:
            job = rules.job_of(
                workload, None, default_runtime=timedelta(seconds=default_runtime),
                default_max_delay=None,
            )  # fmt: skip
        except ValueError:
            continue
        out.append(job)
    return out


class KueueController(Controller):
    """What the Kueue controllers share: the manager's client, the reader of the manager's
    and the workers' objects, the leader gate and the Event recorder."""

    def __init__(
        self,
        api: client.ApiClient,
        config: Config,
        feed: Feed,
        gate: Gate,
        workers: kube.Workers,
        *,
        events: EventRecorder | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.api = api
        self.config = config
        self.gate = gate
        self.events = events
        self.clock = clock
        self.interval = config.kueue.interval_seconds
        self.reader = KueueReader(api, config, feed, workers)
