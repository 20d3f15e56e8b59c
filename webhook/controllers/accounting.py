"""The leader's carbon accounting: energy, emissions, the counterfactual, what was avoided.

Every ``accounting.interval_seconds`` while this replica leads, the leader reads where the
replicas of every managed object really ran and adds the interval since its last pass to
that object's totals (:mod:`webhook.decision.accounting`, at the intensity the feed
holds for each zone at the end of the interval):

- a managed (Cluster)PropagationPolicy (``carbonshift.io/decision``): its
  ResourceBindings (``spec.clusters``: replicas per member cluster; ``spec.replicas``,
  ``replicaRequirements`` cpu per replica); the counterfactual divides the same replicas
  as the user's own placement would
  (:func:`~webhook.decision.karmada.accounting.counterfactual_placement`, room from the Clusters'
  resource summaries);
- a managed NodePool: its Nodes (label ``karpenter.sh/nodepool``, ``status.capacity.cpu``)
  per topology zone (``nodepools.topology_zones`` -> grid zone, else ``zone``); the
  counterfactual spreads the same vCPUs evenly over the zones the user's own requirements
  allow;
- a managed Liqo NamespaceOffloading: the Running pods of its namespace on Liqo virtual
  nodes (``liqo.io/type=virtual-node``), per remote cluster (``liqo.io/remote-cluster-id``,
  its grid zone as the peers give it), at their containers' cpu requests; the
  counterfactual spreads the same vCPUs evenly over the remote clusters the user's own
  ``clusterSelector`` allows (:func:`webhook.kinds.offloadings.counterfactual`). Its
  energy is always estimated: the leader's Kepler does not see the remote clusters'
  machines. Pods running locally are not the object's doing and are not accounted.

Which kinds are accounted, and how, is each kind's
:attr:`~webhook.kinds.base.Kind.accounting` in the registry (:data:`webhook.kinds.REGISTRY`).

Energy is estimated with the coefficient unless ``accounting.prometheus_url`` is set:
then each pass asks that Prometheus for Kepler's joules of the interval
(:mod:`webhook.prometheus.kepler`, one energy zone), and a policy's figure is measured (method
``kepler``) when Kepler covers every cluster its replicas ran in; a NodePool's is its
nodes' joules per zone.

Totals survive restarts and leader changes: the leader keeps them in the ConfigMap
``accounting.configmap`` of the lease namespace (``totals.json``: per object, per signal
and method, and per cluster; ``series.json``: hourly fleet points for the report's plots;
``meta.json``: the time of the last pass). A new leader resumes from it; the interval
since the last pass is counted when it is at most two intervals long (else the gap is
not counted: where the replicas ran meanwhile is not known).

Metrics, one series per managed object and signal/method (never per pod):
``carbonshift_energy_kwh_total``, ``carbonshift_emissions_grams_total``,
``carbonshift_counterfactual_emissions_grams_total`` (counters that start from the
persisted totals) and ``carbonshift_avoided_emissions_grams_total`` (a gauge: it falls
when carbonshift's placement emits more). A replica that stops leading drops its series.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from typing import Any, cast

import structlog
from kubernetes_asyncio import client
from kubernetes_asyncio.client.rest import ApiException

from webhook import kinds
from webhook.controllers.runner import Controller
from webhook.decision.accounting import (
    Coefficients,
    Intensity,
    Interval,
    PodJoules,
    account,
    measured,
    workload_joules,
)
from webhook.decision.karmada.accounting import counterfactual_placement
from webhook.decision.karmada.bindings import (
    BINDINGS,
    CLUSTERS,
    owner,
    placed,
    requests,
    resource_summaries,
    workload,
)
from webhook.decision.karmada.capacity import room
from webhook.decision.karmada.division import divide_static
from webhook.decision.karpenter.accounting import nodepool_zones
from webhook.decision.ledger import (
    LEDGER_LABELS,
    Ledger,
    ObjectKey,
    ObjectTotals,
    key_text,
    parse_key,
)
from webhook.decision.liqo.peers import REMOTE_ID_LABEL
from webhook.decision.liqo.peers import SELECTOR as VIRTUAL_NODES
from webhook.decision.quantity import quantity
from webhook.kinds import Context, Kind
from webhook.kinds.base import Accounting
from webhook.kinds.offloadings import counterfactual as offloaded_counterfactual
from webhook.kube.client import (
    FIELD_MANAGER,
    REQUEST_TIMEOUT,
    error_name,
    list_objects,
    refused,
)
from webhook.kube.writes import Gate
from webhook.model.config import ClusterConfig, Config
from webhook.model.errors import AccountingError, QueryError
from webhook.model.intensity import utcnow
from webhook.model.objects import dig, items, mapping, meta_of, strings
from webhook.model.resources import Resource
from webhook.model.vocabulary import DECISION
from webhook.prometheus.kepler import Kepler
from webhook.runtime import metrics

log = structlog.get_logger("carbonshift.accounting")

NODEPOOL_LABEL = "karpenter.sh/nodepool"
ZONE_LABEL = "topology.kubernetes.io/zone"
MILLI = 0.001

Obj = dict[str, Any]


def accounted(how: Accounting) -> tuple[Kind, ...]:
    """The registered kinds accounted ``how`` (:attr:`webhook.kinds.base.Kind.accounting`)."""
    return tuple(k for k in kinds.REGISTRY if k.accounting == how)


class Accountant(Controller):
    """Accounts the managed objects' emissions while this replica leads."""

    name = "accounting"

    def __init__(
        self,
        api: client.ApiClient,
        config: Config,
        context: Callable[[], Context],
        gate: Gate,
        *,
        namespace: str,
        clock: Callable[[], datetime.datetime] = utcnow,
    ) -> None:
        self.api = api
        self.core = client.CoreV1Api(api)
        self.config = config
        self.settings = config.accounting
        self.context = context
        self.gate = gate
        self.namespace = namespace
        self.clock = clock
        self.coefficients = Coefficients(
            watts_per_vcpu=self.settings.watts_per_vcpu,
            pue=self.settings.pue,
            embodied_g_per_vcpu_hour=self.settings.embodied_g_per_vcpu_hour,
        )
        self.interval = self.settings.interval_seconds
        self.kepler = (
            Kepler(
                self.settings.prometheus_url,
                zone=self.settings.kepler_zone,
                cluster_label=self.settings.kepler_cluster_label,
            )
            if self.settings.prometheus_url
            else None
        )
        self.ledger: Ledger | None = None
        self._version: str | None = None

    # --- one pass -------------------------------------------------------------------------

    async def reconcile(self) -> int:
        """Account every managed object once; the number of objects accounted."""
        if not self.gate.leading:
            self.forget()
            return 0
        if self.ledger is None:
            self.ledger = await self._load()
            if self.ledger is None:
                return 0
            _publish_all(self.ledger)
        ledger = self.ledger
        now = self.clock()
        hours = None
        if ledger.last is not None:
            seconds = (now - ledger.last).total_seconds()
            if 0 < seconds <= 2 * self.interval + 60:
                hours = seconds / 3600.0
        ledger.last = now
        ledger.since = ledger.since or now
        done = 0
        if hours is not None:
            done = await self._account(ledger, now, hours)
            metrics.ACCOUNTED.labels("accounted").inc()
        else:
            metrics.ACCOUNTED.labels("skipped").inc()
        if self.gate.leading:
            await self._save(ledger)
        return done

    async def _account(self, ledger: Ledger, now: datetime.datetime, hours: float) -> int:
        ctx = self.context()
        intensities = _cluster_intensities(ctx)
        point = ledger.point(now)
        point["i"].update({c: round(i.value, 1) for c, i in intensities.items()})
        replicas: dict[str, float] = {}
        done = 0
        pods, nodes = await self._measured(hours)
        for key, interval, counts in await self._policies(intensities, hours, pods):
            for c, n in counts.items():
                replicas[c] = replicas.get(c, 0) + n
            done += self._add(ledger, point, key, interval, hours, counts)
        for key, interval, counts in await self._nodepools(ctx, hours, nodes):
            done += self._add(ledger, point, key, interval, hours, counts)
        for key, interval, counts in await self._offloaded(ctx, hours):
            done += self._add(ledger, point, key, interval, hours, counts)
        point["r"] = replicas
        metrics.ACCOUNTED_REPLICAS.clear()
        for cluster, n in replicas.items():
            metrics.ACCOUNTED_REPLICAS.labels(cluster).set(n)
        return done

    def _add(  # noqa: PLR0917 - one call site
        self,
        ledger: Ledger,
        point: dict[str, Any],
        key: ObjectKey,
        interval: Interval,
        hours: float,
        counts: Mapping[str, float],
    ) -> int:
        entry = ledger.objects.setdefault(key_text(key), ObjectTotals())
        try:
            totals = entry.add(interval, hours, counts)
        except AccountingError as exc:
            log.warning("accounting_refused", object=key_text(key), error=str(exc))
            return 0
        signal, method = str(interval.actual.signal), interval.actual.method
        labels = (*key, signal, method)
        metrics.ENERGY_KWH.labels(*labels).inc(interval.actual.kwh)
        metrics.EMISSIONS_GRAMS.labels(*labels).inc(interval.actual.grams)
        metrics.COUNTERFACTUAL_GRAMS.labels(*labels).inc(interval.counterfactual.grams)
        metrics.AVOIDED_GRAMS.labels(*labels).set(totals.avoided_grams)
        point["g"][signal] = point["g"].get(signal, 0.0) + interval.actual.grams
        point["c"][signal] = point["c"].get(signal, 0.0) + interval.counterfactual.grams
        return 1

    async def _measured(self, hours: float) -> tuple[list[PodJoules], dict[str, float]]:
        """Kepler's joules of every pod and node over the interval (none without a
        Prometheus URL, or when it cannot be asked: the energy is then estimated)."""
        if self.kepler is None:
            return [], {}
        seconds = hours * 3600.0
        try:
            return await self.kepler.pods(seconds), await self.kepler.nodes(seconds)
        except QueryError as exc:
            metrics.ACCOUNTED.labels("kepler_unavailable").inc()
            log.warning("kepler_query_failed", url=self.kepler.url, error=str(exc))
            return [], {}

    async def _policies(
        self, intensities: Mapping[str, Intensity], hours: float, pods: list[PodJoules]
    ) -> list[tuple[ObjectKey, Interval, Mapping[str, float]]]:
        managed: dict[ObjectKey, Obj] = {}
        for row in accounted("bindings"):
            for policy in await self._managed(row):
                meta = meta_of(policy)
                managed[row.kind, meta.namespace, meta.name] = policy
        if not managed:
            return []
        clusters = await self._list(CLUSTERS)
        summaries = resource_summaries(clusters)
        out: list[tuple[ObjectKey, Interval, Mapping[str, float]]] = []
        for bindings in BINDINGS:
            for binding in await self._list(bindings):
                made_by = owner(binding)
                if made_by is None or made_by not in managed:
                    continue
                got = self._binding(managed[made_by], binding, summaries, intensities, hours, pods)
                if got is not None:
                    out.append((made_by, *got))
        return out

    def _binding(  # noqa: PLR0917 - one call site
        self,
        policy: Mapping[str, Any],
        binding: Mapping[str, Any],
        summaries: Mapping[str, object],
        intensities: Mapping[str, Intensity],
        hours: float,
        pods: list[PodJoules],
    ) -> tuple[Interval, Mapping[str, float]] | None:
        actual = placed(binding)
        if not actual:
            return None
        need = requests(binding)
        cpu = quantity(need.get("cpu"))
        if cpu is None or cpu <= 0:
            return None  # no cpu request: no energy to estimate
        spec = mapping(binding, "spec")
        replicas = spec.get("replicas")
        if not isinstance(replicas, int) or replicas <= 0:
            replicas = sum(actual.values())
        target = workload(binding)
        uid = str(dig(spec, "resource", "uid") or "") if target else ""
        room_now = {
            name: (room(summary, need) or 0) + actual.get(name, 0)
            for name, summary in summaries.items()
        }
        counterfactual = counterfactual_placement(policy, replicas, uid=uid, room=room_now)
        joules = None
        if target is not None and pods:
            _, kind, namespace, name = target
            joules = measured(workload_joules(pods, kind, namespace, name), actual)
        try:
            interval = account(
                actual,
                actual if counterfactual is None else counterfactual,
                intensities,
                vcpu_per_replica=float(cpu),
                hours=hours,
                coefficients=self.coefficients,
                joules=joules,
            )
        except AccountingError as exc:
            log.info(
                "accounting_skipped", binding=meta_of(binding).namespaced_name, reason=str(exc)
            )
            return None
        return interval, actual

    async def _nodepools(
        self, ctx: Context, hours: float, node_joules: Mapping[str, float]
    ) -> list[tuple[ObjectKey, Interval, Mapping[str, float]]]:
        pools = [(row.kind, p) for row in accounted("nodes") for p in await self._managed(row)]
        if not pools:
            return []
        try:
            nodes = await self.core.list_node(
                label_selector=NODEPOOL_LABEL, _request_timeout=REQUEST_TIMEOUT
            )
        except ApiException as exc:
            if not refused(exc, "list", "nodes"):
                log.warning("accounting_list_failed", resource="nodes", error=error_name(exc))
            return []
        topology = dict(self.config.nodepools.topology_zones)
        millicores: dict[str, dict[str, int]] = {}
        joules: dict[str, dict[str, float]] = {}
        for node in nodes.items:
            labels = strings(node.metadata.labels)
            owner_pool, zone = labels.get(NODEPOOL_LABEL), labels.get(ZONE_LABEL) or "local"
            cpu = quantity(strings(node.status.capacity if node.status else None).get("cpu"))
            if owner_pool and cpu is not None and cpu > 0:
                per = millicores.setdefault(str(owner_pool), {})
                per[zone] = per.get(zone, 0) + int(cpu * 1000)
                used = joules.setdefault(str(owner_pool), {})
                used[zone] = used.get(zone, 0.0) + node_joules.get(node.metadata.name, 0.0)
        out: list[tuple[ObjectKey, Interval, Mapping[str, float]]] = []
        for kind, pool in pools:
            name = meta_of(pool).name
            actual = millicores.get(name)
            if not actual:
                continue
            places = set(actual) | set(topology)
            intensities = _zone_intensities(ctx, places, topology, self.config.zone)
            allowed = nodepool_zones(pool, topology)
            counterfactual = (
                divide_static(sum(actual.values()), dict.fromkeys(allowed, 1))
                if allowed
                else actual
            )
            try:
                interval = account(
                    actual,
                    counterfactual,
                    intensities,
                    vcpu_per_replica=MILLI,
                    hours=hours,
                    coefficients=self.coefficients,
                    joules=measured(joules.get(name, {}), actual) if node_joules else None,
                )
            except AccountingError as exc:
                log.info("accounting_skipped", nodepool=name, reason=str(exc))
                continue
            vcpus = {z: m * MILLI for z, m in actual.items()}
            out.append(((kind, "", name), interval, vcpus))
        return out

    async def _offloaded(
        self, ctx: Context, hours: float
    ) -> list[tuple[ObjectKey, Interval, Mapping[str, float]]]:
        offloadings = [
            (row.kind, o) for row in accounted("offloaded-pods") for o in await self._managed(row)
        ]
        if not offloadings:
            return []
        try:
            virtual = await self.core.list_node(
                label_selector=VIRTUAL_NODES, _request_timeout=REQUEST_TIMEOUT
            )
        except ApiException as exc:
            if not refused(exc, "list", "nodes"):
                log.warning("accounting_list_failed", resource="nodes", error=error_name(exc))
            return []
        remote = {
            node.metadata.name: str(cluster_id)
            for node in virtual.items
            if (cluster_id := strings(node.metadata.labels).get(REMOTE_ID_LABEL))
        }
        peers = ctx.known_peers
        intensities = _intensities(peers, ctx)
        out: list[tuple[ObjectKey, Interval, Mapping[str, float]]] = []
        for kind, obj in offloadings:
            meta = meta_of(obj)
            got = await self._offloaded_pods(meta.namespace, remote)
            if got is None:
                return out
            millicores, pods = got
            if not millicores:
                continue
            try:
                interval = account(
                    millicores,
                    offloaded_counterfactual(obj, millicores, peers),
                    intensities,
                    vcpu_per_replica=MILLI,
                    hours=hours,
                    coefficients=self.coefficients,
                )
            except AccountingError as exc:
                log.info("accounting_skipped", offloading=meta.namespaced_name, reason=str(exc))
                continue
            out.append(((kind, meta.namespace, meta.name), interval, pods))
        return out

    async def _offloaded_pods(
        self, namespace: str, remote: Mapping[str, str]
    ) -> tuple[dict[str, int], dict[str, float]] | None:
        """Millicores requested and pods per remote cluster of the Running pods of
        ``namespace`` on virtual nodes; None when the pods cannot be listed."""
        try:
            listed = await self.core.list_namespaced_pod(
                namespace, _request_timeout=REQUEST_TIMEOUT
            )
        except ApiException as exc:
            if not refused(exc, "list", "pods"):
                log.warning("accounting_list_failed", resource="pods", error=error_name(exc))
            return None
        millicores: dict[str, int] = {}
        pods: dict[str, float] = {}
        for pod in listed.items:
            cluster_id = remote.get((pod.spec.node_name if pod.spec else None) or "")
            if cluster_id is None or (pod.status.phase if pod.status else None) != "Running":
                continue
            cpu = sum(
                (
                    quantity(strings(c.resources.requests if c.resources else None).get("cpu"))
                    or Decimal(0)
                    for c in items(pod.spec.containers)
                ),
                Decimal(0),
            )
            if cpu <= 0:
                continue  # no cpu request: no energy to estimate
            millicores[cluster_id] = millicores.get(cluster_id, 0) + int(cpu * 1000)
            pods[cluster_id] = pods.get(cluster_id, 0) + 1
        return millicores, pods

    # --- reading and writing --------------------------------------------------------------

    async def _managed(self, row: Kind) -> list[Obj]:
        """The objects of ``row``'s kind carbonshift decided (``carbonshift.io/decision``)."""
        listed = await self._list(row.api)
        return [o for o in listed if DECISION in meta_of(o).annotations]

    async def _list(self, resource: Resource) -> list[Obj]:
        """Every object of the resource; none when it cannot be listed now."""
        listed = await list_objects(self.api, resource, event="accounting_list_failed")
        return listed if listed is not None else []  # none this pass

    async def _load(self) -> Ledger | None:
        """The persisted ledger (empty when there is none); None when it cannot be read."""
        name = self.settings.configmap
        try:
            found = await self.core.read_namespaced_config_map(
                name, self.namespace, _request_timeout=REQUEST_TIMEOUT
            )
        except ApiException as exc:
            if exc.status == 404:
                self._version = None
                return Ledger()
            metrics.KUBE_ERRORS.labels("configmaps", error_name(exc)).inc()
            log.warning("accounting_load_failed", configmap=name, error=error_name(exc))
            return None
        self._version = found.metadata.resource_version
        ledger = Ledger.from_data(found.data)
        log.info("accounting_resumed", objects=len(ledger.objects), last=found.data is not None)
        return ledger

    async def _save(self, ledger: Ledger) -> None:
        name = self.settings.configmap
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": dict(LEDGER_LABELS),
                **({"resourceVersion": self._version} if self._version else {}),
            },
            "data": ledger.to_data(),
        }
        options: dict[str, Any] = {
            "field_manager": FIELD_MANAGER,
            "_request_timeout": REQUEST_TIMEOUT,
        }
        try:
            for attempt in range(2):
                try:
                    if self._version is None:
                        stored = await self.core.create_namespaced_config_map(
                            self.namespace, cast(Any, body), **options
                        )
                    else:
                        stored = await self.core.replace_namespaced_config_map(
                            name, self.namespace, cast(Any, body), **options
                        )
                    self._version = stored.metadata.resource_version
                    return  # noqa: TRY300
                except ApiException as exc:
                    if exc.status not in (404, 409) or attempt == 1:
                        raise
                    # Written by someone else (a former leader's last write) or gone:
                    # this leader's ledger includes everything it read; write it over.
                    metrics.KUBE_CONFLICTS.labels("configmaps").inc()
                    try:
                        current = await self.core.read_namespaced_config_map(
                            name, self.namespace, _request_timeout=REQUEST_TIMEOUT
                        )
                        self._version = current.metadata.resource_version
                    except ApiException as again:
                        if again.status != 404:
                            raise
                        self._version = None
                    body["metadata"].pop("resourceVersion", None)
                    if self._version:
                        body["metadata"]["resourceVersion"] = self._version
        except ApiException as exc:
            metrics.KUBE_ERRORS.labels("configmaps", error_name(exc)).inc()
            if not refused(exc, "update", "configmaps"):
                log.warning("accounting_save_failed", configmap=name, error=error_name(exc))

    def forget(self) -> None:
        """Not leading: drop the in-memory ledger and this replica's series."""
        if self.ledger is not None:
            self.ledger = None
            for metric in (
                metrics.ENERGY_KWH,
                metrics.EMISSIONS_GRAMS,
                metrics.COUNTERFACTUAL_GRAMS,
                metrics.AVOIDED_GRAMS,
                metrics.ACCOUNTED_REPLICAS,
            ):
                metric.clear()

    def lost(self) -> None:
        self.forget()

    def failed(self) -> None:
        metrics.ACCOUNTED.labels("error").inc()
        super().failed()

    def describe(self) -> dict[str, Any]:
        return {
            "watts_per_vcpu": self.settings.watts_per_vcpu,
            "pue": self.settings.pue,
            "embodied_g_per_vcpu_hour": self.settings.embodied_g_per_vcpu_hour,
            "configmap": f"{self.namespace}/{self.settings.configmap}",
        }


def _publish_all(ledger: Ledger) -> None:
    """Start this term's series from the persisted totals."""
    for text, entry in ledger.objects.items():
        key = parse_key(text)
        if key is None:
            continue
        for label, totals in entry.totals.items():
            signal, _, method = label.partition("/")
            labels = (*key, signal, method)
            metrics.ENERGY_KWH.labels(*labels).inc(max(0.0, totals.kwh))
            metrics.EMISSIONS_GRAMS.labels(*labels).inc(max(0.0, totals.grams))
            metrics.COUNTERFACTUAL_GRAMS.labels(*labels).inc(max(0.0, totals.counterfactual_grams))
            metrics.AVOIDED_GRAMS.labels(*labels).set(totals.avoided_grams)


def _cluster_intensities(ctx: Context) -> dict[str, Intensity]:
    """Member cluster -> the intensity of its grid zone now (clusters without one left out)."""
    return _intensities(ctx.clusters, ctx)


def _intensities(places: Mapping[str, ClusterConfig], ctx: Context) -> dict[str, Intensity]:
    """Place (member cluster, remote cluster id) -> the intensity of its grid zone now."""
    out = {}
    for name, member in places.items():
        zone = member.grid_zone
        reading = ctx.table.get(zone) if zone else None
        if reading is not None:
            out[name] = Intensity(reading.value, reading.signal, reading.source)
    return out


def _zone_intensities(
    ctx: Context, places: Iterable[str], topology: Mapping[str, str], local: str | None
) -> dict[str, Intensity]:
    """Topology zone -> the intensity of its grid zone (``local``: the config's zone)."""
    out = {}
    for place in places:
        zone = topology.get(place) or local
        reading = ctx.table.get(zone) if zone else None
        if reading is not None:
            out[place] = Intensity(reading.value, reading.signal, reading.source)
    return out
