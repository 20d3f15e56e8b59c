"""The leader's Kueue MultiKueue dispatcher: where a Job's Workload goes.

While this replica leads, on each pass (every ``kueue.interval_seconds``, and at once when
a watched Workload or MultiKueue object changes or a decision falls due: see
:class:`webhook.controllers.kueue.fleet.KueueController`; a pass reads the watched caches),
with ``kueue.dispatch``:

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
``carbonshift_kueue_orders_total``. When carbonshift stops, Kueue keeps dispatching in the
last order written.

In every mode (``none`` too) each pass counts the Workloads that wait for a nomination
longer than ``kueue.round_seconds`` (:func:`webhook.decision.kueue.waiting_since`):
``carbonshift_kueue_workloads_waiting``, and a warning ``kueue_workloads_waiting`` naming
them; nobody dispatches them (Kueue's ``dispatcherName`` names carbonshift while
``kueue.dispatch`` is not ``external``, or the nominations fail).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import structlog
from kubernetes_asyncio import client
from kubernetes_asyncio.client.rest import ApiException

from webhook.controllers.kueue.fleet import (
    RESYNC_SECONDS,
    KueueController,
    decision_of,
    finished,
    job_opted_out,
    since_of,
)
from webhook.decision import kueue as rules
from webhook.decision.hysteresis import Hysteresis
from webhook.decision.optin import not_opted_in
from webhook.kube import kueue as kube
from webhook.kube.client import REQUEST_TIMEOUT, error_name
from webhook.kube.writes import NotLeader, apply_metadata, update
from webhook.model import vocabulary
from webhook.model.objects import condition, items, meta_of, text
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
    """Nominates MultiKueue workers (``external``) or orders MultiKueueConfigs (``order``)."""

    name = "kueue_dispatch"

    _said_another = False
    """The warning about another dispatcher's nominations was given (once a process)."""
    _said_waiting: tuple[str, ...] = ()
    """The Workloads the last ``kueue_workloads_waiting`` warning named."""
    _again: float = 0.0
    """Seconds until the Workload being decided is due again (:meth:`_soon`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._recent: dict[str, rules.Job] = {}
        """Key -> the Workload as this replica nominated it, until the cache shows it."""

    @property
    def hysteresis(self) -> Hysteresis:
        return self.config.hysteresis

    async def reconcile(self) -> dict[str, int]:
        """One pass; outcome -> count (``nominated``, ``all_at_once``, ``widened``,
        ``ordered``, ``error``). Every mode then counts the Workloads waiting for a
        nomination longer than a round (``carbonshift_kueue_workloads_waiting``)."""
        mode = self.config.kueue.dispatch
        if not await self._begin():
            return {}
        workloads = self.reader.workloads()
        written: set[str] = set()
        if mode == "order":
            outcomes = await self._order_pass()
        elif mode == "external":
            outcomes = await self._dispatch_pass(workloads, written)
        else:
            outcomes = {}
        self._measure(workloads, written)
        self.settle(workloads)
        return outcomes

    def lost(self) -> None:
        super().lost()
        self._recent = {}
        metrics.KUEUE_WAITING.set(0)  # the new leader counts them

    def _measure(self, workloads: Mapping[str, Obj], written: set[str]) -> None:
        """``carbonshift_kueue_workloads_waiting``: the Workloads :func:`webhook.decision.
        kueue.waiting_since` more than a round ago (not counting those nominated now)."""
        now = self.clock()
        round_seconds = timedelta(seconds=self.config.kueue.round_seconds)
        waiting = []
        for key, workload in workloads.items():
            if key in written or key in self._recent:
                continue
            since = rules.waiting_since(workload, self.reader.multikueue_check(workload))
            if since is not None and now - since > round_seconds:
                waiting.append(key)
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

    # --- external: nominate -----------------------------------------------------------------

    def _in_flight(self, workloads: Mapping[str, Obj]) -> list[rules.Job]:
        """The Workloads nominated and not admitted yet, with what this replica nominated
        that the cache does not show yet (a watch event lags the write)."""
        flying = self.reader.in_flight()
        for key, job in list(self._recent.items()):
            held = workloads.get(key)
            shown = held is not None and (
                finished(held) or text(held, "status", "clusterName")
                or set(job.nominated) <= set(items(held, "status", "nominatedClusterNames"))
            )  # fmt: skip
            if held is None or shown:
                del self._recent[key]
            else:
                flying = [j for j in flying if j.key != job.key] + [job]
        return flying

    async def _dispatch_pass(
        self, workloads: Mapping[str, Obj], written: set[str]
    ) -> dict[str, int]:
        flying = self._in_flight(workloads)
        namespaces = self.reader.namespaces()
        outcomes: dict[str, int] = {}
        for key in sorted(workloads):
            workload = workloads[key]
            meta = meta_of(workload)
            if not self._dispatchable(workload) or self.held(key, workload):
                continue
            if not self.gate.leading:
                break
            self._again = RESYNC_SECONDS
            try:
                outcome, job = await self._dispatch(
                    workload, namespaces.get(meta.namespace, {}), flying
                )
            except NotLeader:
                break
            except ApiException as exc:
                outcome, job = "error", None
                metrics.KUEUE_NOMINATIONS.labels("error").inc()
                problem = error_name(exc)
                log.warning("kueue_nomination_failed", workload=meta.name,
                            namespace=meta.namespace, error=problem,
                            hint="409: the Workload changed since it was read; the next "
                            "pass reads it again" if problem == "409" else None)  # fmt: skip
            if job is not None:
                flying = [j for j in flying if j.key != job.key] + [job]
                self._recent[key] = job
            if outcome == "error":
                self.forget(key)
            else:
                self.hold(key, workload, self._again)
            if outcome:
                outcomes[outcome] = outcomes.get(outcome, 0) + 1
                if outcome != "error":
                    written.add(key)
        return outcomes

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

    def _soon(self, seconds: float) -> None:
        """The Workload being decided is due again within ``seconds`` (a round ends, the
        feed may know its zones)."""
        self._again = max(1.0, min(self._again, seconds))

    async def _dispatch(
        self, workload: Obj, namespace: Mapping[str, str], flying: list[rules.Job]
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
        return await self._nominate(workload, job, flying)

    async def _nominate(
        self, workload: Obj, job: rules.Job, flying: list[rules.Job]
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
        self._soon((rounds + 1) * round_seconds - waited)  # the next round
        outlooks, readings = self.reader.outlooks((w.zone for w in workers), job.hours)
        nomination = rules.nominate(
            job, workers, outlooks, flying, rounds=rounds, step=self.config.kueue.step,
            readings=readings,
        )  # fmt: skip
        if not nomination.names:
            return await self._all_at_once(workload, nomination.reason), None
        young = now - job.created < timedelta(seconds=round_seconds)
        if young and not any(v is not None for v in nomination.means.values()):
            self._soon(min(self.interval, (job.created - now).total_seconds() + round_seconds))
            return "", None  # the feed was just asked for the workers' zones: next pass
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
        recorded on it): leave it alone, and say so once."""
        if not self._said_another:
            self._said_another = True
            meta = meta_of(workload)
            log.warning(
                "kueue_nominated_by_another", workload=meta.name, namespace=meta.namespace,
                nominated=list(nominated),
                hint="set Kueue's multiKueue.dispatcherName to "
                f"{self.config.kueue.dispatcher_name}, or kueue.dispatch to order or none",
            )  # fmt: skip

    # --- order: MultiKueueConfig.spec.clusters ---------------------------------------------

    async def _order_pass(self) -> dict[str, int]:
        configs = self.reader.caches.multikueue_configs.items()
        outcomes: dict[str, int] = {}
        for _, found in sorted(configs.items()):
            if not_opted_in(found, None) is not None:
                continue
            if not self.gate.leading:
                break
            try:
                changed = await self._order(found)
            except NotLeader:
                break
            except ApiException as exc:
                metrics.KUEUE_ORDERS.labels("error").inc()
                log.warning("kueue_order_failed", multikueue_config=meta_of(found).name,
                            error=error_name(exc))  # fmt: skip
                outcomes["error"] = outcomes.get("error", 0) + 1
                continue
            if changed:
                outcomes["ordered"] = outcomes.get("ordered", 0) + 1
        return outcomes

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
