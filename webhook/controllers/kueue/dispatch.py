"""The leader's Kueue MultiKueue dispatcher: where a Job's Workload goes.

While this replica leads, a keyed controller (see
:class:`webhook.controllers.kueue.fleet.KueueController`): one Workload (``external``) or
one MultiKueueConfig (``order``) per reconcile, one at a time, from its own work queue. A
Workload is decided when it changes, when the manager's other objects it reads change
(its namespace's labels, the queues, checks, MultiKueueConfigs and MultiKueueClusters),
when a feed refresh changes the reading or outlook of a zone one of its workers is in,
when its next round comes, and at the latest every 5 minutes; a decision reads the
watched caches. With ``kueue.dispatch``:

``external`` (Kueue's ``multiKueue.dispatcherName`` set to ``kueue.dispatcher_name``, so
nobody else nominates): for each Workload on the manager that has quota reserved, no
``status.clusterName``, and every admission check but MultiKueue's Ready (MultiKueue
dispatches only then). One carbon does not place (its namespace is not labelled
``carbonshift.io/enabled=true`` or it is labelled ``false``,
:func:`webhook.decision.optin.not_opted_in`; its Job is labelled
``carbonshift.io/enabled=false``; an annotation of its Job is malformed, then the Event is
a Warning naming it; no worker's queues can be read) is nominated to every active worker
of its MultiKueueConfig at once, as Kueue's own all-at-once dispatcher would
(:func:`webhook.decision.kueue.all_at_once`): no Job waits for carbonshift. For the others
the dispatcher reads the workers (:mod:`webhook.controllers.kueue.fleet`),
the jobs nominated and not yet admitted, and the feed's outlook of each worker's zone, and
writes what :func:`webhook.decision.kueue.nominate` says into
``status.nominatedClusterNames``: the greenest worker with room first, the next ones
each ``kueue.round_seconds`` no nominated worker admitted it (rounds are counted from the
first nomination, kept in the Workload's ``carbonshift.io/decision`` annotation, so a new
leader goes on where the last one stopped). A nomination is only ever widened, never
revoked (a worker may have started to admit the Workload). A Workload another dispatcher
nominated (no nomination of carbonshift's recorded on it: Kueue's ``dispatcherName`` is
not carbonshift's) is left alone, with one warning. The status is applied as
Kueue's own admission status (field manager ``kueue-admission``, guarded by the
``resourceVersion`` read), so Kueue's apply that sets ``clusterName`` clears it. Each
nomination is explained: the annotation (:func:`webhook.decision.kueue.record`), an Event
``CarbonDispatched`` and ``carbonshift_kueue_nominations_total``.

``order`` (Kueue's incremental dispatcher): each ``MultiKueueConfig`` labelled
``carbonshift.io/enabled=true`` gets its ``spec.clusters`` in carbon order
(:func:`webhook.decision.kueue.order`, damped by the hysteresis section; the order's start
kept in its ``carbonshift.io/decision`` annotation), an update guarded by the
``resourceVersion`` read, an Event ``CarbonOrderChanged`` and
``carbonshift_kueue_orders_total``. A MultiKueueConfig is ordered again when it changes,
when a MultiKueueCluster changes, when a feed refresh changes one of its workers' zones,
at the next forecast hour or the dwell's end, and at the latest every 5 minutes. When
carbonshift stops, Kueue keeps dispatching in the last order written.

A nomination or an order the API server refuses (a 409 after a concurrent change, RBAC, a
webhook) is logged, counted as ``error`` and tried again after the key's back-off
(half a second, doubling up to 5 minutes).

In every mode (``none`` too) the leader counts the Workloads that wait for a nomination
longer than ``kueue.round_seconds`` (:func:`webhook.decision.kueue.waiting_since`), again
whenever the Workloads change or one starts to wait past a round:
``carbonshift_kueue_workloads_waiting``, and a warning ``kueue_workloads_waiting`` naming
them; nobody dispatches them (Kueue's ``dispatcherName`` names carbonshift while
``kueue.dispatch`` is not ``external``, or the nominations fail).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Collection, Iterable, Mapping, Set
from datetime import datetime, timedelta
from typing import Any

import structlog
from kubernetes_asyncio import client
from kubernetes_asyncio.client.rest import ApiException

from webhook.controllers.kueue.fleet import (
    CARBON_WINDOWS,
    MULTIKUEUE_CONFIG,
    NAMESPACES,
    WORKLOAD,
    Due,
    Key,
    KueueController,
    decision_of,
    finished,
    job_opted_out,
    next_change,
    since_of,
)
from webhook.controllers.runner import Retry
from webhook.decision import kueue as rules
from webhook.decision.hysteresis import Hysteresis
from webhook.decision.optin import not_opted_in
from webhook.kube import kueue as kube
from webhook.kube.client import REQUEST_TIMEOUT, error_name
from webhook.kube.writes import NotLeader, apply_metadata, update
from webhook.model import vocabulary
from webhook.model.objects import condition, items, meta_of, text
from webhook.model.resources import Resource
from webhook.model.validation import InvalidInput
from webhook.runtime import metrics

log = structlog.get_logger("carbonshift.kueue")

Obj = dict[str, Any]
DISPATCHED = "CarbonDispatched"
ORDER_CHANGED = "CarbonOrderChanged"
NOMINATED_AT = "nominatedAt"
"""Decision annotation key: when the first nomination was written (rounds count from it)."""
ORDERED_AT = "orderedAt"
"""Decision annotation key of a MultiKueueConfig: when its order was last written."""


def waiting_on_checks(workload: Mapping[str, Any], multikueue_check: str | None) -> bool:
    """True while an admission check other than MultiKueue's is not Ready."""
    for check in items(workload, "status", "admissionChecks"):
        if text(check, "name") != multikueue_check and text(check, "state") != "Ready":
            return True
    return False


class KueueDispatcher(KueueController):
    """Nominates MultiKueue workers (``external``) or orders MultiKueueConfigs (``order``).

    One key at a time (:attr:`workers` is 1): each nomination counts the ones before it
    against the workers' room."""

    name = "kueue_dispatch"

    _said_another = False
    """The warning about another dispatcher's nominations was given (once a process)."""
    _said_waiting: tuple[str, ...] = ()
    """The Workloads the last ``kueue_workloads_waiting`` warning named."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._recent: dict[str, rules.Job] = {}
        """Key -> the Workload as this replica nominated it, until the cache shows it."""
        self._mine: set[str] = set()
        """The Workloads this replica nominated this term (the record of a nomination may
        reach the cache after the nomination itself: that is not another dispatcher's)."""
        self._measured: tuple[object, int, datetime | None] | None = None
        """The Workloads' view and the nominations not shown yet the waiting Workloads were
        last counted on, and when the next one starts to wait past a round."""

    @property
    def hysteresis(self) -> Hysteresis:
        return self.config.hysteresis

    # --- what is queued -------------------------------------------------------------------

    @property
    def mode(self) -> str:
        return self.config.kueue.dispatch

    def keys(self) -> list[Key]:
        """``external``: every Workload not finished; ``order``: every MultiKueueConfig."""
        if self.mode == "order":
            configs = self.reader.caches.multikueue_configs.items()
            return [(MULTIKUEUE_CONFIG, name) for name in sorted(configs)]
        return sorted(self.workload_keys()) if self.mode == "external" else []

    def changed(self, resource: Resource, keys: Collection[str]) -> Iterable[Key]:
        """``external``: a Workload's change queues it, a Namespace's its Workloads, any
        other object's every Workload; ``order``: a MultiKueueConfig's change queues it, a
        MultiKueueCluster's (its zone) every MultiKueueConfig."""
        if self.mode == "order":
            if resource == kube.MULTIKUEUE_CONFIG:
                return [(MULTIKUEUE_CONFIG, key) for key in keys]
            return self.keys() if resource == kube.MULTIKUEUE_CLUSTER else []
        if self.mode != "external":
            return []
        if resource == kube.WORKLOAD:
            return [(WORKLOAD, key) for key in keys]
        if resource == NAMESPACES:
            return self.workload_keys(keys)
        return [] if resource == CARBON_WINDOWS else self.workload_keys()

    def fed(self, zones: Set[str]) -> Iterable[Key]:
        """The Workloads waiting for a nomination (or the MultiKueueConfigs) that may go
        to a worker in ``zones``."""
        if self.mode == "order":
            configs = self.reader.caches.multikueue_configs.items()
            return [
                (MULTIKUEUE_CONFIG, name) for name, found in configs.items()
                if not zones.isdisjoint(z for z in self.reader.config_zones(found).values() if z)
            ]  # fmt: skip
        if self.mode != "external":
            return []
        return [
            (WORKLOAD, key) for key, workload in self.reader.workloads().items()
            if self._dispatchable(workload) and not zones.isdisjoint(self.reader.zones_of(workload))
        ]  # fmt: skip

    def poll(self) -> None:
        """As every Kueue controller's, then the waiting Workloads counted (when the
        Workloads changed or the next one starts to wait past a round)."""
        super().poll()
        self._measure()

    def settled(self) -> None:
        super().settled()
        self._measure()

    def lost(self) -> None:
        super().lost()
        self._recent, self._mine = {}, set()
        self._measured = None
        metrics.KUEUE_WAITING.set(0)  # the new leader counts them

    def _measure(self) -> None:
        """``carbonshift_kueue_workloads_waiting``: the Workloads :func:`webhook.decision.
        kueue.waiting_since` more than a round ago (not counting those nominated and not
        shown by the cache yet)."""
        workloads = self.reader.workloads()
        now = self.clock()
        held = self._measured
        same = held is not None and held[0] is workloads and held[1] == len(self._recent)
        if same and held is not None and (held[2] is None or now <= held[2]):
            return  # nothing changed, and nobody starts to wait past a round yet
        round_seconds = timedelta(seconds=self.config.kueue.round_seconds)
        waiting, due = [], None
        for key, workload in workloads.items():
            if key in self._recent:
                continue
            since = rules.waiting_since(workload, self.reader.multikueue_check(workload))
            if since is None:
                continue
            if now - since > round_seconds:
                waiting.append(key)
            elif due is None or since + round_seconds < due:
                due = since + round_seconds
        self._measured = (workloads, len(self._recent), due)
        waiting.sort()
        metrics.KUEUE_WAITING.set(len(waiting))
        if waiting and tuple(waiting) != self._said_waiting:
            log.warning("kueue_workloads_waiting", count=len(waiting), workloads=waiting[:10],
                        dispatch=self.config.kueue.dispatch,
                        hint="no worker was nominated for them for longer than "
                        "kueue.round_seconds: Kueue's multiKueue.dispatcherName names "
                        f"{self.config.kueue.dispatcher_name} only with kueue.dispatch: "
                        "external; else see kueue_nomination_failed")  # fmt: skip
        self._said_waiting = tuple(waiting)

    # --- one key --------------------------------------------------------------------------

    async def reconcile(self, key: Key) -> float | None:
        """Nominate one Workload's workers (``external``) or order one MultiKueueConfig
        (``order``); seconds until it is due again (a round ending, the next forecast
        hour, a dwell ending, at the latest :data:`RESYNC_SECONDS`), None when only a
        change brings it back. A write the API server refused is logged and retried with
        the key's back-off (:class:`~webhook.controllers.runner.Retry`)."""
        kind, name = key
        if kind == MULTIKUEUE_CONFIG and self.mode == "order":
            return await self._order_key(name)
        if kind != WORKLOAD or self.mode != "external":
            return None
        workload = self.reader.workload(name)
        if workload is None:
            self._recent.pop(name, None)
            self._mine.discard(name)
            return None
        if not self._dispatchable(workload) or not self.gate.leading:
            return None
        meta = meta_of(workload)
        due = Due()
        try:
            outcome, job = await self._dispatch(
                workload, self.reader.namespace(meta.namespace), self._in_flight(), due
            )
        except NotLeader:
            return None  # the term ends: the next one queues every Workload
        except ApiException as exc:
            metrics.KUEUE_NOMINATIONS.labels("error").inc()
            self.count("error")
            problem = error_name(exc)
            log.warning("kueue_nomination_failed", workload=meta.name,
                        namespace=meta.namespace, error=problem,
                        hint="409: the Workload changed since it was read; it is read "
                        "again" if problem == "409" else None)  # fmt: skip
            raise Retry(f"Workload {name} was not nominated") from exc
        if job is not None:
            self._recent[name] = job
        self.count(outcome)
        return due.seconds

    # --- external: nominate -----------------------------------------------------------------

    def _in_flight(self) -> list[rules.Job]:
        """The Workloads nominated and not admitted yet, with what this replica nominated
        that the cache does not show yet (a watch event lags the write)."""
        flying = self.reader.in_flight()
        for key, job in list(self._recent.items()):
            held = self.reader.workload(key)
            shown = held is not None and (
                finished(held) or text(held, "status", "clusterName")
                or set(job.nominated) <= set(items(held, "status", "nominatedClusterNames"))
            )  # fmt: skip
            if held is None or shown:
                del self._recent[key]
            else:
                flying = [j for j in flying if j.key != job.key] + [job]
        return flying

    def _dispatchable(self, workload: Obj) -> bool:
        """Quota reserved, not admitted anywhere nor finished nor evicted (as Kueue's
        dispatchers: its eviction ends first), every other check Ready."""
        if finished(workload) or text(workload, "status", "clusterName"):
            return False
        if condition(workload, "QuotaReserved") != "True":
            return False
        if condition(workload, "Evicted") == "True":
            return False
        return not waiting_on_checks(workload, self.reader.multikueue_check(workload))

    async def _dispatch(
        self, workload: Obj, namespace: Mapping[str, str], flying: list[rules.Job], due: Due
    ) -> tuple[str, rules.Job | None]:
        """Carbon places ``workload`` (:meth:`_nominate`) unless it may not: then every
        active worker is nominated at once (:meth:`_all_at_once`)."""
        why_not = not_opted_in(workload, namespace)
        if why_not is not None:
            return await self._all_at_once(workload, why_not), None
        labels, annotations = await self.reader.job_metadata(workload)
        why_not = job_opted_out(labels)
        if why_not is not None:
            return await self._all_at_once(workload, why_not), None
        try:
            job = self.reader.job_of(workload, annotations)
        except InvalidInput as exc:
            return await self._all_at_once(workload, f"{exc}", warning=True), None
        return await self._nominate(workload, job, flying, due)

    async def _nominate(
        self, workload: Obj, job: rules.Job, flying: list[rules.Job], due: Due
    ) -> tuple[str, rules.Job | None]:
        workers = await self.reader.fleet(workload)
        if workers is None:
            return "", None  # MultiKueue does not dispatch it
        if not workers:
            return await self._all_at_once(workload, "no worker's queues could be read"), None
        now = self.clock()
        since = since_of(workload, NOMINATED_AT) if job.nominated else None
        if job.nominated and since is None:
            self._another(workload, job.nominated)
            return "", None
        round_seconds = self.config.kueue.round_seconds
        waited = 0.0 if since is None else (now - since).total_seconds()
        rounds = max(0, math.floor(waited / round_seconds))
        due.soon((rounds + 1) * round_seconds - waited)  # the next round
        outlooks, readings = self.reader.outlooks((w.zone for w in workers), job.hours)
        nomination = rules.nominate(
            job, workers, outlooks, flying, rounds=rounds, step=self.config.kueue.step,
            readings=readings,
        )  # fmt: skip
        if not nomination.names:
            return await self._all_at_once(workload, nomination.reason), None
        young = now - job.created < timedelta(seconds=round_seconds)
        if young and not any(v is not None for v in nomination.means.values()):
            due.soon(min(self.interval, (job.created - now).total_seconds() + round_seconds))
            return "", None  # the feed was just asked for the workers' zones: soon again
        added = [n for n in nomination.names if n not in job.nominated]
        if not added:
            return "", None
        names = [*job.nominated, *added][: rules.MAX_NOMINATED]
        outcome = "widened" if job.nominated else "nominated"
        zones = {w.name: w.zone for w in workers}
        recorded = {**decision_of(workload), **rules.record(nomination, zones=zones)}
        recorded["nominated"] = names
        recorded[NOMINATED_AT] = vocabulary.format_time(since or now)
        note = f"nominated {', '.join(names)}: {nomination.reason}"
        if outcome == "widened":
            note = f"round {nomination.round}: {note}"
        await self._write(workload, names, recorded, note, outcome)
        log.info("kueue_nominated", workload=meta_of(workload).name,
                 namespace=meta_of(workload).namespace, nominated=names,
                 round=nomination.round, reason=nomination.reason)  # fmt: skip
        return outcome, dataclasses.replace(job, nominated=tuple(names))

    async def _all_at_once(self, workload: Obj, why: str, *, warning: bool = False) -> str:
        """Nominate every worker of ``workload``'s MultiKueueConfig that Kueue reaches, as
        Kueue's own all-at-once dispatcher would (:func:`webhook.decision.kueue.
        all_at_once`): carbon does not place it (``why``), and it must not wait for
        carbonshift. ``warning``: its Event is a Warning (a malformed annotation, named in
        ``why``). A nomination is only ever widened, as on the carbon path."""
        clusters = self.reader.clusters_of(workload)
        if clusters is None:
            return ""
        nominated = [n for n in items(workload, "status", "nominatedClusterNames")
                     if isinstance(n, str) and n]  # fmt: skip
        since = since_of(workload, NOMINATED_AT)
        if nominated and since is None:
            self._another(workload, tuple(nominated))
            return ""
        added = [n for n in rules.all_at_once(clusters, self.reader.active())
                 if n not in nominated]  # fmt: skip
        if not added:
            return ""
        names = [*nominated, *added][: rules.MAX_NOMINATED]
        outcome = "widened" if nominated else "all_at_once"
        reason = f"every active worker at once, carbon does not place it: {why}"
        recorded = {k: v for k, v in decision_of(workload).items()
                    if k not in ("ranked", "means", "round")}  # fmt: skip
        recorded.update(nominated=names, reason=reason)
        recorded[NOMINATED_AT] = vocabulary.format_time(since or self.clock())
        note = f"nominated {', '.join(names)}: {reason}"
        await self._write(workload, names, recorded, note, outcome, warning=warning)
        log.info("kueue_nominated_all_at_once", workload=meta_of(workload).name,
                 namespace=meta_of(workload).namespace, nominated=names, reason=why)  # fmt: skip
        return outcome

    async def _write(
        self, workload: Obj, names: list[str], recorded: Mapping[str, Any], note: str,
        outcome: str, *, warning: bool = False,
    ) -> None:  # fmt: skip
        """The nomination as Kueue's admission status, then its record (the annotation), its
        Event and its count."""
        status = kube.admission_status(workload, names)
        await kube.apply_status(self.api, self.gate, workload, kube.WORKLOAD, status=status,
                                manager=kube.ADMISSION_MANAGER)  # fmt: skip
        metrics.KUEUE_NOMINATIONS.labels(outcome).inc()
        meta = meta_of(workload)
        self._mine.add(f"{meta.namespace}/{meta.name}")
        try:
            await apply_metadata(
                self.api, self.gate, kube.WORKLOAD, name=meta.name,
                namespace=meta.namespace,
                annotations={vocabulary.DECISION: json.dumps(recorded, sort_keys=True)},
            )  # fmt: skip
        except ApiException as exc:
            log.warning("kueue_decision_not_recorded", workload=meta.name, error=error_name(exc))
        if self.events is not None:
            await self.events.emit(workload, reason=DISPATCHED, note=note, action="Nominate",
                                   type="Warning" if warning else "Normal")  # fmt: skip

    def _another(self, workload: Obj, nominated: tuple[str, ...]) -> None:
        """Another dispatcher nominated ``workload`` (no nomination of carbonshift's is
        recorded on it): leave it alone, and say so once (not for a nomination of this
        replica's whose record the cache does not show yet)."""
        meta = meta_of(workload)
        if not self._said_another and f"{meta.namespace}/{meta.name}" not in self._mine:
            self._said_another = True
            log.warning(
                "kueue_nominated_by_another", workload=meta.name, namespace=meta.namespace,
                nominated=list(nominated),
                hint="set Kueue's multiKueue.dispatcherName to "
                f"{self.config.kueue.dispatcher_name}, or kueue.dispatch to order or none",
            )  # fmt: skip

    # --- order: MultiKueueConfig.spec.clusters ---------------------------------------------

    async def _order_key(self, name: str) -> float | None:
        """Order one MultiKueueConfig opted in; seconds until it is looked at again (the
        next forecast hour or the dwell's end, at the latest :data:`RESYNC_SECONDS`)."""
        found = self.reader.caches.multikueue_configs.get(name)
        if found is None or not_opted_in(found, None) is not None or not self.gate.leading:
            return None
        try:
            changed = await self._order(found)
        except NotLeader:
            return None
        except ApiException as exc:
            metrics.KUEUE_ORDERS.labels("error").inc()
            self.count("error")
            log.warning("kueue_order_failed", multikueue_config=name,
                        error=error_name(exc))  # fmt: skip
            raise Retry(f"MultiKueueConfig {name} was not ordered") from exc
        if changed:
            self.count("ordered")
        now = self.clock()
        since = since_of(self.reader.caches.multikueue_configs.get(name) or found, ORDERED_AT)
        dwell = None if since is None else since + timedelta(hours=self.hysteresis.dwell_hours)
        due = Due()
        due.soon(next_change(now, dwell if dwell is not None and dwell > now else None))
        return due.seconds

    async def _order(self, found: Obj) -> bool:
        name = meta_of(found).name
        hours = rules.hours_of(timedelta(seconds=self.config.kueue.default_runtime_seconds))
        decided: dict[str, Any] = {}
        held: list[Obj] = [found]

        async def read() -> Obj:
            if held:
                return held.pop()  # as the cache holds it; read again after a conflict
            got = await kube.get(self.api, kube.MULTIKUEUE_CONFIG, name)
            if got is None:
                raise ApiException(status=404, reason=f"MultiKueueConfig {name} is gone")
            return got

        def change(current: Obj) -> Obj | None:
            zones = self.reader.config_zones(current)
            workers = [rules.Worker(n, z, {}) for n, z in zones.items()]
            outlooks, readings = self.reader.outlooks(zones.values(), hours)
            now = self.clock()
            since = since_of(current, ORDERED_AT)
            held = math.inf if since is None else (now - since).total_seconds() / 3600
            proposed, reason = rules.order(
                list(zones), workers, outlooks, held, self.hysteresis, hours=hours,
                readings=readings,
            )  # fmt: skip
            decided.update(reason=reason, clusters=proposed, before=list(zones))
            if proposed is None:
                return None
            recorded = {**decision_of(current), "order": proposed, "reason": reason,
                        ORDERED_AT: vocabulary.format_time(now)}  # fmt: skip
            out = dict(current)
            out["spec"] = {**current.get("spec", {}), "clusters": proposed}
            metadata = dict(current["metadata"])
            metadata["annotations"] = {
                **meta_of(current).annotations,
                vocabulary.DECISION: json.dumps(recorded, sort_keys=True),
            }
            out["metadata"] = metadata
            return out

        config = kube.MULTIKUEUE_CONFIG

        async def write(wanted: Obj) -> Obj:
            result = await client.CustomObjectsApi(self.api).replace_cluster_custom_object(
                config.group, config.version, config.plural, name, wanted,
                _request_timeout=REQUEST_TIMEOUT,
            )  # fmt: skip
            stored: Obj = dict(result)
            return stored

        stored = await update(read, change, write, gate=self.gate,
                              resource=kube.MULTIKUEUE_CONFIG.name)  # fmt: skip
        if stored is None:
            return False
        metrics.KUEUE_ORDERS.labels("changed").inc()
        note = f"clusters {', '.join(decided['clusters'])} (was {', '.join(decided['before'])}): "
        note += decided["reason"]
        if self.events is not None:
            await self.events.emit(stored, reason=ORDER_CHANGED, note=note, action="Order")
        log.info("kueue_order_changed", multikueue_config=name, clusters=decided["clusters"],
                 before=decided["before"], reason=decided["reason"])  # fmt: skip
        return True

    def describe(self) -> dict[str, Any]:
        return {"dispatch": self.config.kueue.dispatch,
                "dispatcher_name": self.config.kueue.dispatcher_name}  # fmt: skip
