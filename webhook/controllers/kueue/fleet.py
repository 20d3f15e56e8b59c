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

The manager's objects are held by watched caches (:class:`KueueCaches`, shared by both
controllers: list, then watch from the list's ``resourceVersion``, relisted on ``410
Gone``), each cut down to what a decision reads (:func:`slim_workload`, :func:`slim`):
the Workloads, ClusterQueues, AdmissionChecks, MultiKueueConfigs, MultiKueueClusters,
CarbonWindows and the Namespaces' labels. A change to any of them wakes the controllers
(:meth:`KueueController.changed`); a pass reads memory only, and asks the API server
only for what no watch holds (the owning Job, the workers' queues) when a Workload is
decided. A controller that was not started (a one-off pass: a test, the CLI) lists the
caches once per pass instead (:meth:`KueueReader.begin`). Worker clients live in
:class:`webhook.kube.kueue.Workers`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import structlog
from kubernetes_asyncio import client

from webhook.controllers.runner import Controller, Feed
from webhook.decision import kueue as rules
from webhook.kinds.reevaluation import Reevaluation
from webhook.kube import kueue as kube
from webhook.kube.cache import WatchedCache
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

log = structlog.get_logger("carbonshift.kueue")

Obj = dict[str, Any]
HOURS_AHEAD = 24
"""The longest outlook asked for (the feed's forecasts cover a day)."""
RESYNC_SECONDS = 300.0
"""How long a decision is held while neither its Workload, the manager's other objects nor
the feed change: the safety net for what no watch reports (the owning Job's annotations,
the workers' quota)."""


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


class KueueCaches:
    """The manager's objects the Kueue controllers read, each a watched cache (shared by
    the dispatcher and the carbon window: started by the first, stopped by the last).
    :attr:`generation` grows whenever anything but a Workload changes; a Workload change
    names its keys. Either calls every listener (:meth:`listen`)."""

    def __init__(self) -> None:
        def cache(resource: Resource, kind: str, decode: Any = slim) -> WatchedCache[Any]:
            return WatchedCache(resource, decode, kind=kind, on_keys=self._inputs)

        self.workloads: WatchedCache[Obj] = WatchedCache(
            kube.WORKLOAD, slim_workload, kind="kueue_workload", on_keys=self._workloads
        )
        self.cluster_queues: WatchedCache[Obj] = cache(kube.CLUSTER_QUEUE, "kueue_cluster_queue")
        self.admission_checks: WatchedCache[Obj] = cache(
            kube.ADMISSION_CHECK, "kueue_admission_check"
        )
        self.multikueue_configs: WatchedCache[Obj] = cache(
            kube.MULTIKUEUE_CONFIG, "multikueue_config"
        )
        self.multikueue_clusters: WatchedCache[Obj] = cache(
            kube.MULTIKUEUE_CLUSTER, "multikueue_cluster"
        )
        self.carbon_windows: WatchedCache[Obj] = cache(CARBON_WINDOWS, "carbon_window")
        self.namespaces: WatchedCache[Mapping[str, str]] = WatchedCache(
            NAMESPACES, _labels, kind="namespace", objects=CoreObjects.of("list_namespace"),
            on_keys=self._inputs,
        )  # fmt: skip
        self.by_resource: dict[Resource, WatchedCache[Obj]] = {
            kube.CLUSTER_QUEUE: self.cluster_queues,
            kube.ADMISSION_CHECK: self.admission_checks,
            kube.MULTIKUEUE_CONFIG: self.multikueue_configs,
            kube.MULTIKUEUE_CLUSTER: self.multikueue_clusters,
        }
        self.needed: tuple[WatchedCache[Any], ...] = (
            self.workloads, *self.by_resource.values(), self.namespaces,
        )  # fmt: skip
        """What a pass cannot do without (the CarbonWindows are optional: without them a
        check's default delay is the config's)."""
        self.all: tuple[WatchedCache[Any], ...] = (*self.needed, self.carbon_windows)
        self.generation = 0
        self._listeners: list[Callable[[], None]] = []
        self._users = 0

    def listen(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` after every change."""
        self._listeners.append(listener)

    def _workloads(self, _keys: Collection[str]) -> None:
        for listener in self._listeners:
            listener()

    def _inputs(self, _keys: Collection[str]) -> None:
        self.generation += 1
        for listener in self._listeners:
            listener()

    @property
    def following(self) -> bool:
        """Started: watches keep them current."""
        return self.workloads.following

    @property
    def synced(self) -> bool:
        """Every cache a pass needs is listed and followed."""
        return all(c.synced for c in self.needed)

    def start(self, api: client.ApiClient) -> None:
        """Follow the API server (once, however many controllers start them)."""
        self._users += 1
        if self._users == 1:
            for cache in self.all:
                cache.start(api)

    async def stop(self) -> None:
        """Stop following once the last controller stopped."""
        self._users = max(0, self._users - 1)
        if self._users == 0:
            for cache in self.all:
                await cache.stop()

    async def list_once(self, api: client.ApiClient) -> bool:
        """Fill every cache from one list (a one-off pass); False when one a pass needs
        cannot be listed now (logged)."""
        for cache in self.all:
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
    ) -> None:
        self.api = api
        self.config = config
        self.feed = feed
        self.workers = workers
        self.caches = caches if caches is not None else KueueCaches()
        self.rules = Reevaluation(config, feed.outlook)
        self.default_runtime = config.kueue.default_runtime_seconds
        self._worker_queues: dict[tuple[str, str, str], Obj | None] = {}
        self._flying: tuple[Mapping[str, Obj] | None, list[rules.Job]] = (None, [])

    async def begin(self) -> bool:
        """Start a pass: the caches synced (a controller that was not started lists them
        once instead), and the feed asked for every worker's zone; False when the
        manager's Kueue objects cannot be read now."""
        self._worker_queues = {}
        if not self.caches.following:
            if not await self.caches.list_once(self.api):
                return False
        elif not self.caches.synced:
            return False
        for name in self.caches.multikueue_clusters.items():  # warm before Jobs need them
            zone = self.zone_of(name)
            if zone:
                self.feed.want(zone)
        return True

    def _named(self, resource: Resource, name: str) -> Obj | None:
        return self.caches.by_resource[resource].get(name)

    def workloads(self) -> Mapping[str, Obj]:
        """Every Workload on the manager by ``namespace/name`` (as :func:`slim_workload`
        holds it)."""
        return self.caches.workloads.items()

    def namespaces(self) -> Mapping[str, Mapping[str, str]]:
        """Namespace -> its labels."""
        return self.caches.namespaces.items()

    def in_flight(self) -> list[rules.Job]:
        """:func:`in_flight` of the Workloads as held (computed again only after a
        change)."""
        view = self.workloads()
        if self._flying[0] is not view:
            self._flying = (view, in_flight(view.values(), self.default_runtime))
        return list(self._flying[1])

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
        cluster = self._named(kube.MULTIKUEUE_CLUSTER, worker)
        api = await self.workers.client(cluster) if cluster is not None and local_queue else None
        if api is not None:
            local = await kube.get(api, kube.LOCAL_QUEUE, local_queue, namespace)
            queue_name = text(local, "spec", "clusterQueue") if local is not None else ""
            found = await kube.get(api, kube.CLUSTER_QUEUE, queue_name) if queue_name else None
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
    and the workers' objects (over the watched caches), the leader gate and the Event
    recorder.

    Started, a controller follows the caches and passes every ``kueue.interval_seconds``
    once they have synced, and at once when a watched object changed, the feed was
    refreshed or a decision it made falls due (:meth:`changed`). A pass decides again only
    the Workloads whose object or inputs changed since it last decided them, or whose
    decision fell due (:meth:`held`, :meth:`hold`): with nothing changed a pass makes no
    API call."""

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
        self.reader = KueueReader(api, config, feed, workers, caches)
        self.reader.caches.listen(self._touched)
        self._dirty = True
        """A watched object changed since the last pass (or no pass ran yet)."""
        self._decided: dict[str, tuple[Obj, object, datetime]] = {}
        """Key -> the object as decided, the inputs then, and when it is due again."""
        self._due: datetime | None = None
        """The earliest of the due times in :attr:`_decided`."""
        self._generation: object = None
        """The feed's generation the last pass saw."""

    # --- running --------------------------------------------------------------------------

    def start(self) -> None:
        """Follow the caches, then pass (the first once they have synced)."""
        self.reader.caches.start(self.api)
        super().start()

    async def stop(self) -> None:
        await super().stop()
        await self.reader.caches.stop()

    def _touched(self) -> None:
        """A watched object changed: pass now rather than at the interval's end."""
        self._dirty = True
        self.wake()

    def _feed_generation(self) -> object:
        return getattr(self.reader.feed.snapshot(), "generation", None)

    def changed(self) -> bool:
        """Pass before the interval is up: a watched object changed (once the caches have
        synced), the feed was refreshed, or a decision fell due."""
        if self._dirty:
            return self.reader.caches.synced
        if self._feed_generation() != self._generation:
            return True
        return self._due is not None and self.clock() >= self._due

    def lost(self) -> None:
        """A new term decides everything again."""
        self._decided, self._due, self._dirty = {}, None, True

    async def _begin(self) -> bool:
        """Start a pass (see :meth:`KueueReader.begin`); False: nothing to read yet."""
        dirty, self._dirty = self._dirty, False
        generation = self._feed_generation()
        if not await self.reader.begin():
            self._dirty = dirty or self.reader.caches.following
            return False
        self._generation = generation
        return True

    def _inputs(self) -> object:
        """What every decision reads besides its Workload: the manager's other objects,
        the namespaces' labels and the feed."""
        return (self.reader.caches.generation, self._generation)

    def held(self, key: str, obj: Obj) -> bool:
        """``key`` was decided on this very object and inputs and is not due yet (only when
        following: a one-off pass decides everything)."""
        if not self.reader.caches.following:
            return False
        found = self._decided.get(key)
        if found is None or found[1] != self._inputs():
            return False
        if found[0] is not obj and found[0] != obj:  # a relist decodes equal objects anew
            return False
        return self.clock() < found[2]

    def hold(self, key: str, obj: Obj, seconds: float) -> None:
        """``key`` is decided on ``obj``: again after ``seconds`` unless it or the inputs
        change first."""
        if self.reader.caches.following:
            self._decided[key] = (obj, self._inputs(), self.clock() + timedelta(seconds=seconds))

    def forget(self, key: str) -> None:
        """Decide ``key`` again on the next pass."""
        self._decided.pop(key, None)

    def settle(self, keys: Collection[str]) -> None:
        """After a pass: drop what is gone (``keys``: every Workload held) and note the
        earliest due time."""
        self._decided = {k: v for k, v in self._decided.items() if k in keys}
        self._due = min((v[2] for v in self._decided.values()), default=None)
