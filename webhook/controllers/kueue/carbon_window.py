"""The leader's carbon window: the Kueue admission check that holds a Job for a greener start.

On each pass while this replica leads (as the dispatcher's: over the watched caches, woken
by their changes, a Pending Workload looked at again at the next hour or its deadline,
:class:`webhook.controllers.kueue.fleet.KueueController`), for the AdmissionChecks whose
``spec.controllerName`` is ``kueue.admission_check_controller``:

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
``resourceVersion`` read.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

import structlog
from kubernetes_asyncio.client.rest import ApiException

from webhook.controllers.kueue.fleet import (
    RESYNC_SECONDS,
    KueueController,
    decision_of,
    finished,
    job_opted_out,
)
from webhook.decision import kueue as rules
from webhook.decision.optin import not_opted_in
from webhook.kube import kueue as kube
from webhook.kube.client import error_name
from webhook.kube.writes import NotLeader, apply_metadata
from webhook.model import vocabulary
from webhook.model.objects import condition, items, meta_of, text
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


def _next_change(now: datetime, deadline: datetime | None) -> float:
    """Seconds until a held window may end: the next hour (forecasts are hourly) or the
    deadline, whichever comes first."""
    hour = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    until = hour if deadline is None else min(hour, deadline)
    return (until - now).total_seconds()


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

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._activated: dict[str, Obj] = {}
        """Check -> the object it was marked Active from (until the cache shows the write)."""
        self._said_parameters: set[tuple[str, str]] = set()

    def lost(self) -> None:
        super().lost()
        self._activated = {}

    async def reconcile(self) -> dict[str, int]:
        """One pass; state -> Workloads written (``Pending``, ``Ready``, ``active``,
        ``error``)."""
        if not await self._begin():
            return {}
        checks = self.reader.caches.admission_checks.items()
        ours = {name: c for name, c in checks.items()
                if text(c, "spec", "controllerName") == self.controller}  # fmt: skip
        outcomes: dict[str, int] = {}
        activated = [c for name, c in ours.items() if condition(c, "Active") != "True"
                     and self._activated.get(name) != c]  # fmt: skip
        if activated:
            outcomes["active"] = sum([await self._activate(c) for c in activated])
        workloads = self.reader.workloads()
        if not ours:
            self.settle(())
            return outcomes
        namespaces = self.reader.namespaces()
        delays = {name: self._max_delay(check) for name, check in ours.items()}
        flying = self.reader.in_flight()
        for key in sorted(workloads):
            workload = workloads[key]
            if finished(workload) or condition(workload, "QuotaReserved") != "True":
                continue
            entries = [e for e in items(workload, "status", "admissionChecks")
                       if text(e, "name") in ours and text(e, "state") != "Ready"]  # fmt: skip
            if not entries or self.held(key, workload):
                continue
            self._again = RESYNC_SECONDS
            try:
                failed = await self._decide_all(workload, entries, delays, namespaces, flying,
                                                outcomes=outcomes)  # fmt: skip
            except NotLeader:
                return outcomes
            if failed is None:
                return outcomes
            if failed:
                self.forget(key)
            else:
                self.hold(key, workload, self._again)
        self.settle(workloads)
        return outcomes

    async def _decide_all(
        self,
        workload: Obj,
        entries: list[Obj],
        delays: Mapping[str, float | None],
        namespaces: Mapping[str, Mapping[str, str]],
        flying: list[rules.Job],
        *,
        outcomes: dict[str, int],
    ) -> bool | None:
        """Decide each of ``workload``'s checks ``entries`` (counted into ``outcomes``):
        whether one failed; None: this replica stopped leading."""
        failed = False
        for entry in entries:
            if not self.gate.leading:
                return None
            try:
                state = await self._decide(
                    workload, entry, delays[text(entry, "name")], namespaces, flying
                )
            except ApiException as exc:
                state, failed = "error", True
                metrics.KUEUE_WINDOWS.labels("error").inc()
                log.warning("kueue_window_failed", workload=meta_of(workload).name,
                            error=error_name(exc))  # fmt: skip
            if state:
                outcomes[state] = outcomes.get(state, 0) + 1
        return failed

    _again: float = 0.0
    """Seconds until the Workload being decided is due again (:meth:`_soon`)."""

    def _soon(self, seconds: float) -> None:
        """The Workload being decided is due again within ``seconds``."""
        self._again = max(1.0, min(self._again, seconds))

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
            return False
        self._activated[meta_of(check).name] = check
        log.info("carbon_window_active", check=meta_of(check).name)
        return True

    async def _decide(
        self,
        workload: Obj,
        entry: Mapping[str, Any],
        check_delay: float | None,
        namespaces: Mapping[str, Mapping[str, str]],
        flying: list[rules.Job],
    ) -> str:
        meta = meta_of(workload)
        now = self.clock()
        why_not = not_opted_in(workload, namespaces.get(meta.namespace, {}))
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
                    self._soon(min(self.interval, (job.created - now).total_seconds()
                                   + round_seconds))  # fmt: skip
                    return ""  # the feed was just asked for the zone: decide next pass
                state = "Ready" if checked.ready else "Pending"
                if not checked.ready:
                    self._soon(_next_change(now, job.deadline))
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
