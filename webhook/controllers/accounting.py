"""The leader's carbon accounting: energy, emissions, the counterfactual, what was avoided.

Every ``accounting.interval_seconds`` while this replica leads, the leader reads where the
replicas of every managed object really ran and adds the interval since its last pass to
that object's totals (:mod:`webhook.decision.accounting`, at the intensity the feed
holds for each zone at the end of the interval).

This module is the loop, and names no technology: which kinds are accounted, and how, is
each integration row's accounting hooks (:attr:`webhook.integrations.Integration.accounting`,
one :class:`Accounts` each, handed to the :class:`Accountant` in row order). Each pass
lists the managed objects (``carbonshift.io/decision``) of every hook's kinds and hands a
hook with any the :class:`Pass` (the context, the interval, the coefficients, Kepler's
joules, the list helpers); the hook answers one :class:`Accounted` per object it could
account, which the loop adds to the ledger and the metrics. The hooks:

- Karmada (:mod:`webhook.controllers.karmada.binding_accounts`): a (Cluster)PropagationPolicy by
  its ResourceBindings' replicas per member cluster, against the user's own placement;
- Karpenter (:mod:`webhook.controllers.karpenter.node_accounts`): a NodePool by its Nodes'
  vCPUs per topology zone, against an even spread over the zones the user allows;
- Liqo (:mod:`webhook.controllers.liqo.pod_accounts`): a NamespaceOffloading by its
  namespace's Running pods on virtual nodes per remote cluster, against an even spread
  over the remote clusters the user allows (always estimated).

Energy is estimated with the coefficient unless ``accounting.prometheus_url`` is set:
then each pass asks that Prometheus for Kepler's joules of the interval
(:mod:`webhook.prometheus.kepler`, one energy zone), and hands them to the hooks (a
policy's figure is measured when Kepler covers every cluster its replicas ran in; a
NodePool's is its nodes' joules per zone).

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

import dataclasses
import datetime
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, Protocol, cast

import structlog
from kubernetes_asyncio import client
from kubernetes_asyncio.client.rest import ApiException

from webhook.controllers.runner import KeyedController
from webhook.decision.accounting import Coefficients, Intensity, Interval, PodJoules
from webhook.decision.ledger import (
    LEDGER_LABELS,
    Ledger,
    ObjectKey,
    ObjectTotals,
    key_text,
    parse_key,
)
from webhook.kinds import Context, Kind
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
from webhook.model.objects import meta_of
from webhook.model.resources import Resource
from webhook.model.vocabulary import DECISION
from webhook.prometheus.kepler import Kepler
from webhook.runtime import metrics
from webhook.runtime.workqueue import WorkQueue

log = structlog.get_logger("carbonshift.accounting")

MILLI = 0.001
"""vCPUs per millicore: hooks that account millicores pass it as the vCPUs per "replica"."""

Obj = dict[str, Any]
Managed = tuple[Kind, Obj]
"""A managed object (``carbonshift.io/decision``) and the kind it was listed as."""


@dataclasses.dataclass(frozen=True, slots=True)
class Accounted:
    """One managed object's interval, as a hook accounted it."""

    key: ObjectKey
    """The object's ledger key: ``(kind, namespace, name)``."""
    interval: Interval
    """What it used and emitted over the interval, and what the counterfactual would have."""
    places: Mapping[str, float]
    """Where it ran: per place (member cluster, topology zone, remote cluster), what ran
    there (replicas, vCPUs, pods; the ledger's per-place hours)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Pass:
    """What one accounting pass hands each hook: the inputs every object is accounted on,
    Kepler's joules of the interval, and the reads of the API server."""

    api: client.ApiClient
    core: client.CoreV1Api
    config: Config
    """The accountant's configuration."""
    ctx: Context
    """The context of the pass (intensities, fleet, peers), read once."""
    hours: float
    """The interval's length."""
    coefficients: Coefficients
    intensities: Mapping[str, Intensity]
    """Member cluster -> the intensity of its grid zone now (clusters without one left out)."""
    pod_joules: Sequence[PodJoules] = ()
    """Kepler's joules of every pod over the interval (none: estimated)."""
    node_joules: Mapping[str, float] = dataclasses.field(default_factory=dict)
    """Kepler's joules of every node over the interval, by node name (none: estimated)."""

    async def objects(self, resource: Resource) -> list[Obj]:
        """Every object of the custom resource; none when it cannot be listed now."""
        listed = await list_objects(self.api, resource, event="accounting_list_failed")
        return listed if listed is not None else []  # none this pass

    async def nodes(self, selector: str) -> list[client.V1Node] | None:
        """The Nodes ``selector`` selects; None when they cannot be listed now (RBAC's 403
        said once, any other failure logged as ``accounting_list_failed``)."""
        try:
            listed = await self.core.list_node(
                label_selector=selector, _request_timeout=REQUEST_TIMEOUT
            )
        except ApiException as exc:
            if not refused(exc, "list", "nodes"):
                log.warning("accounting_list_failed", resource="nodes", error=error_name(exc))
            return None
        return list(listed.items)

    async def pods(self, namespace: str) -> list[client.V1Pod] | None:
        """The pods of ``namespace``; None when they cannot be listed now."""
        try:
            listed = await self.core.list_namespaced_pod(
                namespace, _request_timeout=REQUEST_TIMEOUT
            )
        except ApiException as exc:
            if not refused(exc, "list", "pods"):
                log.warning("accounting_list_failed", resource="pods", error=error_name(exc))
            return None
        return list(listed.items)


class Accounts(Protocol):
    """An integration's accounting hook: how the managed objects of its kinds are accounted."""

    @property
    def kinds(self) -> tuple[Kind, ...]:
        """The kinds whose managed objects it accounts."""
        ...

    @property
    def replicas(self) -> bool:
        """Whether its :attr:`Accounted.places` are replicas on member clusters (the
        fleet's replicas gauge and the hourly points' ``r`` count them)."""
        ...

    async def account(self, books: Pass, managed: Sequence[Managed]) -> Sequence[Accounted]:
        """The objects of ``managed`` (never empty) it accounts this pass, each once; an
        object it cannot account (nothing ran, no cpu request, no intensity) left out."""
        ...


LEDGER: Final = "ledger"
"""The accountant's one key: a pass adds an interval to every object's totals at once,
as one ledger."""


class Accountant(KeyedController[str]):
    """Accounts the managed objects' emissions while this replica leads: a keyed
    controller with one key (:data:`LEDGER`), due again every
    ``accounting.interval_seconds`` (a term starts with a pass at once; a pass that
    raises is retried with the key's back-off)."""

    name = "accounting"

    def __init__(
        self,
        api: client.ApiClient,
        config: Config,
        context: Callable[[], Context],
        gate: Gate,
        *,
        namespace: str,
        accounts: Iterable[Accounts],
        clock: Callable[[], datetime.datetime] = utcnow,
    ) -> None:
        self.api = api
        self.core = client.CoreV1Api(api)
        self.config = config
        self.settings = config.accounting
        self.context = context
        self.gate = gate
        self.namespace = namespace
        self.accounts = tuple(accounts)
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
        self.queue = WorkQueue()

    def keys(self) -> tuple[str]:
        return (LEDGER,)

    async def reconcile(self, key: str = LEDGER) -> float:
        """A pass (:meth:`account`); due again after the interval."""
        try:
            await self.account()
        except Exception:
            metrics.ACCOUNTED.labels("error").inc()
            raise
        return self.interval

    # --- one pass -------------------------------------------------------------------------

    async def account(self) -> int:
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
        clusters = intensities(ctx.clusters, ctx)
        point = ledger.point(now)
        point["i"].update({c: round(i.value, 1) for c, i in clusters.items()})
        replicas: dict[str, float] = {}
        done = 0
        pods, nodes = await self._measured(hours)
        books = Pass(self.api, self.core, self.config, ctx, hours, self.coefficients, clusters,
                     pods, nodes)  # fmt: skip
        for hook in self.accounts:
            managed = [(k, obj) for k in hook.kinds for obj in await _managed(books, k)]
            if not managed:
                continue
            # Each hook's objects are added once it answered: its reads and log lines
            # come before its objects' ledger entries, as one pass of it.
            for got in await hook.account(books, managed):
                if hook.replicas:
                    for c, n in got.places.items():
                        replicas[c] = replicas.get(c, 0) + n
                done += self._add(ledger, point, got, hours)
        point["r"] = replicas
        metrics.ACCOUNTED_REPLICAS.clear()
        for cluster, n in replicas.items():
            metrics.ACCOUNTED_REPLICAS.labels(cluster).set(n)
        return done

    def _add(self, ledger: Ledger, point: dict[str, Any], got: Accounted, hours: float) -> int:
        key, interval = got.key, got.interval
        entry = ledger.objects.setdefault(key_text(key), ObjectTotals())
        try:
            totals = entry.add(interval, hours, got.places)
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

    # --- reading and writing --------------------------------------------------------------

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


async def _managed(books: Pass, kind: Kind) -> list[Obj]:
    """The objects of ``kind`` carbonshift decided (``carbonshift.io/decision``)."""
    listed = await books.objects(kind.api)
    return [o for o in listed if DECISION in meta_of(o).annotations]


def intensities(places: Mapping[str, ClusterConfig], ctx: Context) -> dict[str, Intensity]:
    """Place (member cluster, remote cluster id) -> the intensity of its grid zone now
    (places without one left out)."""
    out = {}
    for name, member in places.items():
        zone = member.grid_zone
        reading = ctx.table.get(zone) if zone else None
        if reading is not None:
            out[name] = Intensity(reading.value, reading.signal, reading.source)
    return out
