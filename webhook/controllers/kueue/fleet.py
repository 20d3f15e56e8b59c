"""What the Kueue controllers read of a MultiKueue manager, and how they run.

For a Workload on the manager: its ClusterQueue (``status.admission.clusterQueue``, else
the LocalQueue's), that queue's MultiKueue AdmissionCheck (``controllerName``
``kueue.x-k8s.io/multikueue``), the ``MultiKueueConfig`` the check's parameters name, and
for each of its clusters the ``MultiKueueCluster`` (grid zone: its label or annotation
``carbonshift.io/zone``, else ``clusters.<name>.zone`` of the config) and, on the worker
itself, the ClusterQueue its LocalQueue of the same namespace and name points to: the
quota and use :func:`webhook.decision.kueue.worker_of` reads. Also the owning Job's
annotations, and the feed's hourly outlook of a zone by the re-evaluation's forecast
method (``reevaluate.forecast``), with the current readings for zones without one.

The manager's objects are held by watched caches (:class:`KueueCaches`, shared by both
controllers: list, then watch from the list's ``resourceVersion``, relisted on ``410
Gone``), each cut down to what a decision reads (:func:`slim_workload`, :func:`slim`,
:func:`slim_queue`): the Workloads, ClusterQueues, AdmissionChecks, MultiKueueConfigs,
MultiKueueClusters, CarbonWindows and the Namespaces' labels. A decision reads memory,
and asks the API server only for what no watch holds: the owning Job, and the workers'
queues (each read held for :data:`WORKER_READS_SECONDS` at most, until the work queue is
empty, so Workloads decided in a row share the reads; forgotten when the Lease is lost).
The jobs nominated and not admitted yet are indexed from the Workloads' changes.

Both controllers are keyed controllers (:class:`KueueController`, a
:class:`~webhook.controllers.runner.KeyedController`): one key (:data:`Key`: a Workload,
a MultiKueueConfig or an AdmissionCheck) per ``reconcile``, from the controller's own
work queue (deduplicated keys, a per-key exponential back-off after a failure). A term
starts once the caches have synced, with every key queued once. After that a key is
queued when a watch says what it reads changed: a Workload's change queues that
Workload; a change of the manager's other objects queues the Workloads (or the
MultiKueueConfigs) that read them (a Namespace's labels: its Workloads); a feed refresh
queues only those whose workers' zones (else the local ``zone``) changed their reading
or their outlook. A reconcile says when its key is due again: a Kueue round ending, the
next forecast hour, a window's deadline, and at the latest after
:data:`RESYNC_SECONDS` (the safety net for what no watch reports: the Job's annotations,
the workers' room). Losing the Lease drains the queue; the next leader's first sync
decides each key once. A controller that was not started (a one-off sync: a test, the
end-to-end suite) lists the caches once per :meth:`KueueController.sync` instead. Worker
clients live in :class:`webhook.kube.kueue.Workers`.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence, Set
from datetime import datetime, timedelta
from typing import Any

import structlog
from kubernetes_asyncio import client

from webhook.controllers.runner import Feed, KeyedController
from webhook.decision import kueue as rules
from webhook.kinds.reevaluation import Reevaluation
from webhook.kube import kueue as kube
from webhook.kube.cache import CacheSet, WatchedCache
from webhook.kube.client import REQUEST_TIMEOUT, error_name
from webhook.kube.events import EventRecorder
from webhook.kube.watch import CoreObjects
from webhook.kube.writes import Gate
from webhook.model import vocabulary
from webhook.model.config import Config
from webhook.model.intensity import utcnow
from webhook.model.objects import condition, items, meta_of, strings, text
from webhook.model.resources import Resource
from webhook.model.vocabulary import DECISION
from webhook.runtime.workqueue import WorkQueue

log = structlog.get_logger("carbonshift.kueue")

Obj = dict[str, Any]
HOURS_AHEAD = 24
"""The longest outlook asked for (the feed's forecasts cover a day)."""
RESYNC_SECONDS = 300.0
"""How long a decision is held while neither its Workload, the manager's other objects nor
the feed change: the safety net for what no watch reports (the owning Job's annotations,
the workers' quota)."""
WORKER_READS_SECONDS = 5.0
"""How long a worker's queue, as read, is reused by the next Workloads decided (until the
work queue is empty, at most this long)."""

WORKLOAD = "Workload"
MULTIKUEUE_CONFIG = "MultiKueueConfig"
ADMISSION_CHECK = "AdmissionCheck"
Key = tuple[str, str]
"""What a Kueue controller reconciles: (kind, key in its cache): a Workload
(``namespace/name``), a MultiKueueConfig (``order``) or an AdmissionCheck (the carbon
window's Active condition)."""


@dataclasses.dataclass(slots=True)
class Due:
    """Seconds until the key being reconciled is due again: the safety net
    (:data:`RESYNC_SECONDS`), brought forward by what falls due first."""

    seconds: float = RESYNC_SECONDS

    def soon(self, seconds: float) -> None:
        """Due again within ``seconds`` (at least a second from now)."""
        self.seconds = max(1.0, min(self.seconds, seconds))


def next_change(now: datetime, deadline: datetime | None) -> float:
    """Seconds until the next hour (the forecasts are hourly) or ``deadline``, whichever
    comes first."""
    hour = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    until = hour if deadline is None else min(hour, deadline)
    return (until - now).total_seconds()


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


def job_opted_out(job_labels: Mapping[str, str]) -> str | None:
    """Why carbon leaves a Workload alone for its Job's own label: ``carbonshift.io/enabled=
    false`` opts the Job out (as it does any object), even in a labelled namespace; None:
    it does not. (Kueue copies no label of the Job to its Workload unless told to.)"""
    if vocabulary.opt_in(job_labels) is False:
        return f"opted out (its Job is labelled {vocabulary.ENABLED}=false)"
    return None


def finished(workload: Mapping[str, Any]) -> bool:
    return condition(workload, "Finished") == "True" or bool(meta_of(workload).deletion_timestamp)


LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
_WORKLOAD_META = (
    "name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
    "deletionTimestamp", "labels", "annotations", "ownerReferences",
)  # fmt: skip
_WORKLOAD_SPEC = ("queueName", "maximumExecutionTimeSeconds", "priority", "active")
_CONTAINER = ("name", "resources", "restartPolicy")


def _metadata(obj: Mapping[str, Any], keep: Iterable[str] | None = None) -> Obj:
    """``metadata`` without ``managedFields`` and kubectl's last applied configuration
    (only ``keep`` when given)."""
    raw = obj.get("metadata")
    meta: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    out = {k: v for k, v in meta.items() if k != "managedFields"}
    if keep is not None:
        out = {k: out[k] for k in keep if k in out}
    annotations = out.get("annotations")
    if isinstance(annotations, Mapping) and LAST_APPLIED in annotations:
        out["annotations"] = {k: v for k, v in annotations.items() if k != LAST_APPLIED}
    return out


def slim(obj: Mapping[str, Any], _before: Obj | None = None) -> Obj:
    """A manager's Kueue object as the caches hold it: whole but its ``managedFields``
    (ClusterQueues, AdmissionChecks, MultiKueueConfigs and -Clusters are small)."""
    out = {k: v for k, v in obj.items() if k != "metadata"}
    out["metadata"] = _metadata(obj)
    out.setdefault("apiVersion", kube.API_VERSION)
    return out


def slim_queue(obj: Mapping[str, Any], _before: Obj | None = None) -> Obj:
    """A manager's ClusterQueue as the cache holds it: its name and spec (the checks it
    lists); its status changes with every admission and is read by no decision."""
    spec = obj.get("spec")
    return {
        "apiVersion": kube.API_VERSION, "kind": kube.CLUSTER_QUEUE.kind,
        "metadata": _metadata(obj, ("name",)), "spec": spec if isinstance(spec, Mapping) else {},
    }  # fmt: skip


def _pod_set(pod_set: Mapping[str, Any]) -> Obj:
    """A pod set: its name, count and the containers' requests (no pod template)."""
    spec = pod_set.get("template")
    spec = spec.get("spec") if isinstance(spec, Mapping) else None
    kept: Obj = {}
    for field in ("containers", "initContainers"):
        found = items(spec, field) if isinstance(spec, Mapping) else []
        if found:
            kept[field] = [{k: c[k] for k in _CONTAINER if k in c} for c in found]
    out: Obj = {k: pod_set[k] for k in ("name", "count") if k in pod_set}
    if kept:
        out["template"] = {"spec": kept}
    return out


def slim_workload(obj: Mapping[str, Any], _before: Obj | None = None) -> Obj:
    """A Workload as the cache holds it: what the dispatcher and the carbon window read
    (its metadata, queue, requests and status: the admission status is written back as
    read); a finished one only as finished (nothing reads more of it)."""
    head = {"apiVersion": kube.WORKLOAD.api_version, "kind": kube.WORKLOAD.kind}
    if finished(obj):
        meta = _metadata(obj, ("name", "namespace"))
        done = {"type": "Finished", "status": "True"}
        return {**head, "metadata": meta, "status": {"conditions": [done]}}
    spec = obj.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    kept: Obj = {k: spec[k] for k in _WORKLOAD_SPEC if k in spec}
    kept["podSets"] = [_pod_set(p) for p in items(spec, "podSets")]
    out: Obj = {**head, "metadata": _metadata(obj, _WORKLOAD_META), "spec": kept}
    if isinstance(obj.get("status"), Mapping):
        out["status"] = obj["status"]
    return out


def _labels(obj: Mapping[str, Any], _before: Mapping[str, str] | None) -> Mapping[str, str]:
    """A Namespace as the cache holds it: its labels."""
    return dict(strings(meta_of(obj).labels))


CARBON_WINDOWS = Resource("carbonshift.io", "v1alpha1", "carbonwindows", "CarbonWindow")
NAMESPACES = Resource("", "v1", "namespaces", "Namespace")


class KueueCaches(CacheSet):
    """The manager's objects the Kueue controllers read, each a watched cache (shared by
    the dispatcher and the carbon window: started by the first, stopped by the last).
    Every change is told to every listener (:meth:`listen`) with the resource and the
    keys that changed."""

    def __init__(self) -> None:
        super().__init__()
        watched = self.watched
        self.workloads: WatchedCache[Obj] = watched(
            kube.WORKLOAD, slim_workload, kind="kueue_workload"
        )
        self.cluster_queues: WatchedCache[Obj] = watched(
            kube.CLUSTER_QUEUE, slim_queue, kind="kueue_cluster_queue"
        )
        self.admission_checks: WatchedCache[Obj] = watched(
            kube.ADMISSION_CHECK, slim, kind="kueue_admission_check"
        )
        self.multikueue_configs: WatchedCache[Obj] = watched(
            kube.MULTIKUEUE_CONFIG, slim, kind="multikueue_config"
        )
        self.multikueue_clusters: WatchedCache[Obj] = watched(
            kube.MULTIKUEUE_CLUSTER, slim, kind="multikueue_cluster"
        )
        self.carbon_windows: WatchedCache[Obj] = watched(CARBON_WINDOWS, slim, kind="carbon_window")
        self.namespaces: WatchedCache[Mapping[str, str]] = watched(
            NAMESPACES, _labels, kind="namespace", objects=CoreObjects.of("list_namespace")
        )
        self.by_resource: dict[Resource, WatchedCache[Obj]] = {
            kube.CLUSTER_QUEUE: self.cluster_queues,
            kube.ADMISSION_CHECK: self.admission_checks,
            kube.MULTIKUEUE_CONFIG: self.multikueue_configs,
            kube.MULTIKUEUE_CLUSTER: self.multikueue_clusters,
        }
        self.needed = (self.workloads, *self.by_resource.values(), self.namespaces)
        """What a decision cannot do without (the CarbonWindows are optional: without them
        a check's default delay is the config's)."""
        self.caches = (*self.needed, self.carbon_windows)

    def __str__(self) -> str:
        return "kueue"

    async def list_once(self, api: client.ApiClient) -> None:
        """Fill every cache from one list (see :meth:`load`)."""
        await self.load(api)

    async def load(self, api: client.ApiClient) -> bool:
        """Fill every cache from one list (a one-off sync); False when one a decision
        needs cannot be listed now (logged)."""
        for cache in self.caches:
            try:
                await cache.list_once(api)
            except Exception as exc:
                log.warning("kueue_read_failed", verb="list", resource=str(cache),
                            error=error_name(exc))  # fmt: skip
                if cache is not self.carbon_windows:
                    return False
        return True


class KueueReader:
    """Reads the manager and its workers for the rules (see the module's docstring)."""

    def __init__(
        self,
        api: client.ApiClient,
        config: Config,
        feed: Feed,
        workers: kube.Workers,
        caches: KueueCaches | None = None,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.config = config
        self.feed = feed
        self.workers = workers
        self.caches = caches if caches is not None else KueueCaches()
        self.rules = Reevaluation(config, feed.outlook)
        self.default_runtime = config.kueue.default_runtime_seconds
        self.monotonic = monotonic
        self.worker_reads = 0
        """Worker queues read over the network since the replica started (for tests)."""
        self._worker_queues: dict[tuple[str, str, str], tuple[float, Obj | None]] = {}
        self._flying: dict[str, rules.Job] | None = None
        """Workload key -> its job, while nominated and not admitted (None: not indexed
        yet; then kept by the Workloads' changes)."""
        self.caches.listen(self._changed)

    def _changed(self, resource: Resource, keys: Collection[str]) -> None:
        if resource != kube.WORKLOAD or self._flying is None:
            return
        for key in keys:
            found = self.caches.workloads.get(key)
            job = _flying(found, self.default_runtime) if found is not None else None
            if job is None:
                self._flying.pop(key, None)
            else:
                self._flying[key] = job

    def forget_workers(self) -> None:
        """Read the workers' queues afresh from now on."""
        self._worker_queues = {}

    def warm(self) -> None:
        """Ask the feed for every worker's zone (before a Job needs it)."""
        for name in self.caches.multikueue_clusters.items():
            zone = self.zone_of(name)
            if zone:
                self.feed.want(zone)

    def _named(self, resource: Resource, name: str) -> Obj | None:
        return self.caches.by_resource[resource].get(name)

    def workloads(self) -> Mapping[str, Obj]:
        """Every Workload on the manager by ``namespace/name`` (as :func:`slim_workload`
        holds it)."""
        return self.caches.workloads.items()

    def workload(self, key: str) -> Obj | None:
        return self.caches.workloads.get(key)

    def namespace(self, name: str) -> Mapping[str, str]:
        """A namespace's labels."""
        labels = self.caches.namespaces.get(name)
        return {} if labels is None else labels

    def in_flight(self) -> list[rules.Job]:
        """:func:`in_flight` of the Workloads as held (indexed once, then kept by their
        changes)."""
        if self._flying is None:
            self._flying = {
                key: job
                for key, workload in self.workloads().items()
                if (job := _flying(workload, self.default_runtime)) is not None
            }
        return list(self._flying.values())

    # --- the manager ----------------------------------------------------------------------

    def cluster_queue_of(self, workload: Mapping[str, Any]) -> Obj | None:
        name = text(workload, "status", "admission", "clusterQueue")
        return self._named(kube.CLUSTER_QUEUE, name) if name else None

    def checks_of(self, cluster_queue: Mapping[str, Any]) -> list[Obj]:
        """The AdmissionChecks a ClusterQueue lists (both ways Kueue allows)."""
        strategy = items(cluster_queue, "spec", "admissionChecksStrategy", "admissionChecks")
        names = [text(c, "name") for c in strategy]
        names += [n for n in items(cluster_queue, "spec", "admissionChecks") if isinstance(n, str)]
        found = (self._named(kube.ADMISSION_CHECK, n) for n in names if n)
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
                return self._named(kube.MULTIKUEUE_CONFIG, name)
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
        return {name for name, c in self.caches.multikueue_clusters.items().items()
                if condition(c, "Active") == "True"}  # fmt: skip

    def zone_of(self, worker: str) -> str | None:
        """A worker's grid zone: its MultiKueueCluster's ``carbonshift.io/zone``, else the
        config's ``clusters.<name>``."""
        cluster = self._named(kube.MULTIKUEUE_CLUSTER, worker)
        found = zone_label(cluster) if cluster is not None else None
        entry = self.config.clusters.get(worker)
        return found or (entry.grid_zone if entry is not None else None)

    def config_zones(self, multikueue_config: Mapping[str, Any]) -> dict[str, str | None]:
        """Worker -> grid zone, for the clusters of a MultiKueueConfig in its order."""
        names = [n for n in items(multikueue_config, "spec", "clusters") if isinstance(n, str)]
        return {n: self.zone_of(n) for n in names}

    def zones(self) -> set[str]:
        """Every zone a decision may read: the workers' and the local one."""
        names = self.caches.multikueue_clusters.items().keys() | self.config.clusters.keys()
        found = {self.zone_of(n) for n in names} | {self.config.zone}
        return {z for z in found if z}

    def zones_of(self, workload: Mapping[str, Any]) -> set[str]:
        """The zones a decision on ``workload`` reads: its workers' (else the local one)."""
        multikueue_config = self.multikueue_config_of(workload)
        if multikueue_config is None:
            return {self.config.zone} if self.config.zone else set()
        return {z for z in self.config_zones(multikueue_config).values() if z}

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
        now = self.monotonic()
        held = self._worker_queues.get(key)
        if held is not None and now - held[0] < WORKER_READS_SECONDS:
            return held[1]
        found: Obj | None = None
        cluster = self._named(kube.MULTIKUEUE_CLUSTER, worker)
        api = await self.workers.client(cluster) if cluster is not None and local_queue else None
        if api is not None:
            self.worker_reads += 1
            local = await kube.get(api, kube.LOCAL_QUEUE, local_queue, namespace)
            queue_name = text(local, "spec", "clusterQueue") if local is not None else ""
            found = await kube.get(api, kube.CLUSTER_QUEUE, queue_name) if queue_name else None
        self._worker_queues[key] = (now, found)
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


def _flying(workload: Mapping[str, Any], default_runtime: float) -> rules.Job | None:
    """A Workload nominated to workers and admitted by none yet, as a job (its requests are
    what :func:`webhook.decision.kueue.room` counts); None: it is not."""
    if not items(workload, "status", "nominatedClusterNames") or finished(workload):
        return None
    if text(workload, "status", "clusterName"):
        return None
    try:
        return rules.job_of(
            workload, None, default_runtime=timedelta(seconds=default_runtime),
            default_max_delay=None,
        )  # fmt: skip
    except ValueError:
        return None


def in_flight(workloads: Iterable[Mapping[str, Any]], default_runtime: float) -> list[rules.Job]:
    """The manager's Workloads nominated to workers and admitted by none yet, as jobs."""
    found = (_flying(w, default_runtime) for w in workloads)
    return [job for job in found if job is not None]


class KueueController(KeyedController[Key]):
    """What the Kueue controllers share: the manager's client, the reader of the manager's
    and the workers' objects (over the watched caches, which are the controller's caches:
    started with it, a term waiting for their sync), the leader gate, the Event recorder,
    and which keys a change queues (see the module's docstring).

    Subclasses write :meth:`reconcile`, :meth:`keys`, :meth:`changed` (the keys a watched
    object's change queues) and :meth:`fed` (the keys a change of the feed's zones
    queues), counting what they wrote in :attr:`outcomes`."""

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
        caches: KueueCaches | None = None,
    ) -> None:
        self.api = api
        self.config = config
        self.gate = gate
        self.events = events
        self.clock = clock
        self.interval = config.kueue.interval_seconds
        """How soon a Workload younger than a round is looked at again while the feed
        knows none of its zones yet."""
        self.reader = KueueReader(api, config, feed, workers, caches)
        self.caches = (self.reader.caches,)
        self.queue = WorkQueue()
        self.outcomes: collections.Counter[str] = collections.Counter()
        """What was written since the replica started, by outcome."""
        self._seen: tuple[object, object, dict[str, object]] | None = None
        """The feed's table and generation :meth:`poll` last looked at, and the state of
        each zone decisions read (its reading and outlook) then."""
        self._warmed: object = None
        """The MultiKueueClusters' view whose zones the feed was last asked for."""
        self.reader.caches.listen(self._told)

    # --- what is queued -------------------------------------------------------------------

    def changed(self, resource: Resource, keys: Collection[str]) -> Iterable[Key]:
        """The keys a change of ``resource``'s objects ``keys`` queues."""
        raise NotImplementedError

    def fed(self, zones: Set[str]) -> Iterable[Key]:
        """The keys a change of ``zones``' readings or outlooks queues."""
        raise NotImplementedError

    def _told(self, resource: Resource, keys: Collection[str]) -> None:
        if self._term:
            self.enqueue(self.changed(resource, keys))

    def workload_keys(self, namespaces: Collection[str] | None = None) -> list[Key]:
        """The Workloads not finished (in ``namespaces`` only, when given)."""
        return [
            (WORKLOAD, key)
            for key, workload in self.reader.workloads().items()
            if (namespaces is None or key.partition("/")[0] in namespaces)
            and not finished(workload)
        ]

    def poll(self) -> None:
        """Ask the feed for the workers' zones; after a feed refresh, queue the keys whose
        zones' readings or outlooks changed (:meth:`fed`)."""
        clusters = self.reader.caches.multikueue_clusters.items()
        if clusters is not self._warmed:
            self._warmed = clusters
            self.reader.warm()
        snapshot = self.reader.feed.snapshot()
        table, generation = snapshot.table, getattr(snapshot, "generation", None)
        seen = self._seen
        if seen is not None and seen[0] is table and seen[1] == generation:
            return
        states = self._zone_states()
        self._seen = (table, generation, states)
        if seen is None:
            return
        before = seen[2]
        zones = {z for z in before.keys() | states.keys() if before.get(z) != states.get(z)}
        if zones:
            self.enqueue(sorted(set(self.fed(zones))))

    def _zone_states(self) -> dict[str, object]:
        """Each zone decisions may read: its current reading and its outlook."""
        outlooks, readings = self.reader.outlooks(self.reader.zones(), HOURS_AHEAD)
        return {
            zone: (readings.get(zone), None if series is None else tuple(series))
            for zone, series in outlooks.items()
        }

    def settled(self) -> None:
        """The queue is empty: the next Workloads read the workers afresh."""
        self.reader.forget_workers()

    def lost(self) -> None:
        """A new term reads and decides everything again."""
        self.reader.forget_workers()
        self._seen = self._warmed = None

    # --- a one-off sync -------------------------------------------------------------------

    async def sync(self) -> dict[str, int]:
        """Every key reconciled once, as a term's first sync does (a test, the end-to-end
        suite): outcome -> count. Not started, it lists the caches once first."""
        caches = self.reader.caches
        if not caches.following:
            self.reader.forget_workers()
            if not await caches.load(self.api):
                return {}
        elif not caches.synced:
            return {}
        before = collections.Counter(self.outcomes)
        await self.reconcile_all()
        self.settled()
        return dict(self.outcomes - before)

    def count(self, outcome: str) -> None:
        if outcome:
            self.outcomes[outcome] += 1
