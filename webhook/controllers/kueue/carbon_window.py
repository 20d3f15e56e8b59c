"""The leader's carbon window: the Kueue admission check that holds a Job for a greener start.

While this replica leads, a keyed controller (see
:class:`webhook.controllers.kueue.fleet.KueueController`): one Workload or one
AdmissionCheck per reconcile, from its own work queue (a few at once). A Workload is
decided when it changes, when the manager's other objects it reads change (its
namespace's labels, the queues, checks, MultiKueueConfigs, MultiKueueClusters and
CarbonWindows), when a feed refresh changes the reading or outlook of the zone it is
judged on, when its window may end (the next forecast hour, its deadline), and at the
latest every 5 minutes; a decision reads the watched caches. For the AdmissionChecks
whose ``spec.controllerName`` is ``kueue.admission_check_controller``:

- each is kept ``Active`` (status condition ``Active`` True): Kueue treats a check no
  controller marks Active as inactive, and its ClusterQueues admit nothing;
- each Workload with quota reserved that lists such a check not yet Ready gets a state:
  ``Ready``, or ``Pending`` with a message saying until when and why
  (:func:`webhook.decision.kueue.window`). The delay a Job allows is its
  ``carbonshift.io/max-delay`` (read on the Job that owns the Workload), else the
  ``spec.maxDelay`` of the ``CarbonWindow`` (``carbonshift.io/v1alpha1``, cluster-scoped)
  the AdmissionCheck's ``spec.parameters`` names, else ``kueue.default_max_delay_seconds``;
  without one it is Ready at once. The grid it is judged on is the zone of the worker
  MultiKueue will be given first (:func:`webhook.decision.kueue.window_zone`, the same
  ranking as the dispatcher), else the local ``zone`` for a ClusterQueue MultiKueue does
  not dispatch. Never held past the deadline (``created + max-delay``). A Workload whose
  namespace did not opt in (``carbonshift.io/enabled=true``), that or whose Job is labelled
  ``carbonshift.io/enabled=false``, or whose annotation is malformed (a Warning Event names
  it), is Ready at once: the check never blocks a queue.

Each state change is an Event (``CarbonWindowPending`` / ``CarbonWindowReady``), the
``window`` entry of the Workload's ``carbonshift.io/decision`` annotation and
``carbonshift_kueue_windows_total{state}``. The state is applied to
``status.admissionChecks`` with field manager ``carbonshift``, guarded by the
``resourceVersion`` read. A write the API server refuses is logged and tried again after
the key's back-off (half a second, doubling up to 5 minutes).
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Iterable, Mapping, Set
from datetime import datetime, timedelta
from typing import Any

import structlog
from kubernetes_asyncio.client.rest import ApiException

from webhook.controllers.kueue.fleet import (
    ADMISSION_CHECK,
    NAMESPACES,
    WORKLOAD,
    Due,
    Key,
    KueueController,
    decision_of,
    finished,
    job_opted_out,
    next_change,
)
from webhook.controllers.runner import Retry
from webhook.decision import kueue as rules
from webhook.decision.optin import not_opted_in
from webhook.kube import kueue as kube
from webhook.kube.client import error_name
from webhook.kube.writes import NotLeader, apply_metadata
from webhook.model import vocabulary
from webhook.model.objects import condition, items, meta_of, text
from webhook.model.resources import Resource
from webhook.model.validation import InvalidInput
from webhook.runtime import metrics

log = structlog.get_logger("carbonshift.kueue")

Obj = dict[str, Any]
PARAMETERS_GROUP = "carbonshift.io"
PARAMETERS_VERSION = "v1alpha1"
PARAMETERS_KIND = "CarbonWindow"
PARAMETERS_PLURAL = "carbonwindows"
PENDING = "CarbonWindowPending"
READY = "CarbonWindowReady"
ACTIVE_MESSAGE = "carbonshift answers this check (the carbon window)"


def max_delay_of(parameters: Mapping[str, Any] | None) -> float | None:
    """``spec.maxDelay`` of a CarbonWindow in seconds (None: none, or malformed)."""
    raw = text(parameters, "spec", "maxDelay") if parameters is not None else ""
    if not raw:
        return None
    try:
        return vocabulary.max_delay(raw).total_seconds()
    except InvalidInput:
        return None


class CarbonWindow(KueueController):
    """Answers the carbon window AdmissionChecks (see the module's docstring)."""

    name = "carbon_window"

    @property
    def controller(self) -> str:
        """The ``spec.controllerName`` of the AdmissionChecks it answers."""
        return self.config.kueue.admission_check_controller

    workers = 4
    """Workloads decided at once (each decision is its own: nothing is counted against
    another's)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._activated: dict[str, Obj] = {}
        """Check -> the object it was marked Active from (until the cache shows the write)."""
        self._said_parameters: set[tuple[str, str]] = set()

    def lost(self) -> None:
        super().lost()
        self._activated = {}

    # --- what is queued -------------------------------------------------------------------

    def ours(self) -> dict[str, Obj]:
        """The AdmissionChecks it answers, by name."""
        checks = self.reader.caches.admission_checks.items()
        return {name: c for name, c in checks.items()
                if text(c, "spec", "controllerName") == self.controller}  # fmt: skip

    def keys(self) -> list[Key]:
        """Its AdmissionChecks, then every Workload not finished."""
        checks = [(ADMISSION_CHECK, name) for name in sorted(self.ours())]
        return checks + sorted(self.workload_keys())

    def changed(self, resource: Resource, keys: Collection[str]) -> Iterable[Key]:
        """A Workload's change queues it, a Namespace's its Workloads, an AdmissionCheck's
        that check and every Workload, any other object's every Workload."""
        if resource == kube.WORKLOAD:
            return [(WORKLOAD, key) for key in keys]
        if resource == NAMESPACES:
            return self.workload_keys(keys)
        checks = [(ADMISSION_CHECK, k) for k in keys] if resource == kube.ADMISSION_CHECK else []
        return checks + self.workload_keys()

    def fed(self, zones: Set[str]) -> Iterable[Key]:
        """The Workloads held by one of its checks whose grid may be in ``zones``."""
        ours = self.ours()
        return [
            (WORKLOAD, key) for key, workload in self.reader.workloads().items()
            if self._entries(workload, ours)
            and not zones.isdisjoint(self.reader.zones_of(workload))
        ]  # fmt: skip

    @staticmethod
    def _entries(workload: Obj, ours: Mapping[str, Obj]) -> list[Obj]:
        """``workload``'s entries of the checks in ``ours`` not Ready yet (none: finished,
        or no quota reserved)."""
        if finished(workload) or condition(workload, "QuotaReserved") != "True":
            return []
        return [e for e in items(workload, "status", "admissionChecks")
                if text(e, "name") in ours and text(e, "state") != "Ready"]  # fmt: skip

    # --- one key --------------------------------------------------------------------------

    async def reconcile(self, key: Key) -> float | None:
        """Keep one AdmissionCheck Active, or decide one Workload's checks; seconds until
        it is due again (the next hour, its deadline, at the latest
        :data:`RESYNC_SECONDS`), None when only a change brings it back. A write the API
        server refused is logged and retried with the key's back-off
        (:class:`~webhook.controllers.runner.Retry`)."""
        kind, name = key
        if not self.gate.leading:
            return None
        ours = self.ours()
        if kind == ADMISSION_CHECK:
            check = ours.get(name)
            active = check is None or condition(check, "Active") == "True"
            if not active and check is not None and self._activated.get(name) != check:
                await self._activate(check)
            return None
        workload = self.reader.workload(name) if kind == WORKLOAD else None
        entries = self._entries(workload, ours) if workload is not None else []
        if workload is None or not entries:
            return None
        namespace = self.reader.namespace(meta_of(workload).namespace)
        flying = self.reader.in_flight()
        due = Due()
        failed = False
        for entry in entries:
            delay = self._max_delay(ours[text(entry, "name")])
            try:
                state = await self._decide(workload, entry, delay, namespace, flying, due=due)
            except NotLeader:
                return None  # the term ends: the next one queues every Workload
            except ApiException as exc:
                state, failed = "error", True
                metrics.KUEUE_WINDOWS.labels("error").inc()
                log.warning("kueue_window_failed", workload=meta_of(workload).name,
                            error=error_name(exc))  # fmt: skip
            self.count(state)
        if failed:
            raise Retry(f"a check of Workload {name} was not written")
        return due.seconds

    def _max_delay(self, check: Mapping[str, Any]) -> float | None:
        """The per-check default delay: its CarbonWindow's ``spec.maxDelay``."""
        parameters = "spec", "parameters"
        if (text(check, *parameters, "apiGroup"), text(check, *parameters, "kind")) != (
            PARAMETERS_GROUP, PARAMETERS_KIND,
        ):  # fmt: skip
            return None
        name = text(check, *parameters, "name")
        found = self.reader.caches.carbon_windows.get(name)
        if found is None and (meta_of(check).name, name) not in self._said_parameters:
            self._said_parameters.add((meta_of(check).name, name))
            log.warning("carbon_window_parameters_unreadable", check=meta_of(check).name,
                        parameters=name, error="404")  # fmt: skip
        return max_delay_of(found)

    async def _activate(self, check: Obj) -> bool:
        now = self.clock()
        generation = meta_of(check).generation
        kept = [c for c in items(check, "status", "conditions")
                if isinstance(c, Mapping) and c.get("type") != "Active"]  # fmt: skip
        status = {"conditions": [*kept, kube.active_condition(ACTIVE_MESSAGE, now, generation)]}
        try:
            await kube.apply_status(self.api, self.gate, check, kube.ADMISSION_CHECK, status=status)
        except NotLeader:
            return False
        except ApiException as exc:
            log.warning("carbon_window_not_activated", check=meta_of(check).name,
                        error=error_name(exc))  # fmt: skip
            raise Retry(f"AdmissionCheck {meta_of(check).name} was not marked Active") from exc
        self._activated[meta_of(check).name] = check
        self.count("active")
        log.info("carbon_window_active", check=meta_of(check).name)
        return True

    async def _decide(
        self,
        workload: Obj,
        entry: Mapping[str, Any],
        check_delay: float | None,
        namespace: Mapping[str, str],
        flying: list[rules.Job],
        *,
        due: Due,
    ) -> str:
        meta = meta_of(workload)
        now = self.clock()
        why_not = not_opted_in(workload, namespace)
        annotations: dict[str, str] = {}
        if why_not is None:
            labels, annotations = await self.reader.job_metadata(workload)
            why_not = job_opted_out(labels)
        checked: rules.Window | None = None
        if why_not is not None:
            state, message = "Ready", f"carbonshift leaves it alone: {why_not}"
        else:
            try:
                job = self.reader.job_of(workload, annotations, check_delay)
            except InvalidInput as exc:
                state, message = "Ready", f"not held: {exc}"
                if self.events is not None:
                    await self.events.emit(workload, reason=READY, note=message,
                                           action="Admit", type="Warning")  # fmt: skip
            else:
                checked, zone, known = await self._window(workload, job, flying, now)
                round_seconds = self.config.kueue.round_seconds
                young = now - job.created < timedelta(seconds=round_seconds)
                if not known and job.max_delay is not None and young:
                    young_for = (job.created - now).total_seconds() + round_seconds
                    due.soon(min(self.interval, young_for))
                    return ""  # the feed was just asked for the zone: soon again
                state = "Ready" if checked.ready else "Pending"
                if not checked.ready:
                    due.soon(next_change(now, job.deadline))
                message = checked.reason + (f" (grid {zone})" if zone and known else "")
        if (text(entry, "state"), text(entry, "message")) == (state, message):
            return ""
        name = text(entry, "name")
        new = kube.check_state(name, state, message, now, entry)
        await kube.apply_status(self.api, self.gate, workload, kube.WORKLOAD,
                                status={"admissionChecks": [new]})  # fmt: skip
        metrics.KUEUE_WINDOWS.labels(state).inc()
        if checked is not None:
            recorded = {**decision_of(workload), **rules.record(checked=checked)}
            try:
                await apply_metadata(
                    self.api, self.gate, kube.WORKLOAD, name=meta.name,
                    namespace=meta.namespace,
                    annotations={vocabulary.DECISION: json.dumps(recorded, sort_keys=True)},
                )  # fmt: skip
            except ApiException as exc:
                log.warning("kueue_decision_not_recorded", workload=meta.name,
                            error=error_name(exc))  # fmt: skip
        if self.events is not None:
            await self.events.emit(workload, reason=READY if state == "Ready" else PENDING,
                                   note=f"{name}: {message}", action="Admit")  # fmt: skip
        log.info("kueue_window", workload=meta.name, namespace=meta.namespace, check=name,
                 state=state, message=message)  # fmt: skip
        return state

    async def _window(
        self, workload: Obj, job: rules.Job, flying: list[rules.Job], now: datetime
    ) -> tuple[rules.Window, str | None, bool]:
        """The window on the grid of the worker MultiKueue will be given first (else the
        local zone), that zone, and whether the feed holds anything for it yet."""
        deadline = job.deadline
        slack = 0 if deadline is None else max(0, (deadline - now) / timedelta(hours=1))
        horizon = job.hours + math.ceil(slack)
        workers = await self.reader.fleet(workload)
        zone: str | None = self.config.zone
        if workers:
            outlooks, readings = self.reader.outlooks((w.zone for w in workers), job.hours)
            first = rules.window_zone(job, workers, outlooks, flying, readings=readings)
            zone = first[1] if first is not None else None
        if not zone:
            return rules.window(job, None, now), zone, False
        outlooks, readings = self.reader.outlooks([zone], horizon)
        series = outlooks.get(zone)
        known = series is not None or readings.get(zone) is not None
        return rules.window(job, series, now), zone, known
