"""The leader's carbon window: the Kueue admission check that holds a Job for a greener start.

Every ``kueue.interval_seconds`` while this replica leads, for the AdmissionChecks whose
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
from kubernetes_asyncio import client
from kubernetes_asyncio.client.rest import ApiException

from webhook.controllers.kueue_fleet import (
    KueueController,
    decision_of,
    finished,
    in_flight,
    job_opted_out,
    namespace_labels,
)
from webhook.decision import kueue as rules
from webhook.decision.optin import not_opted_in
from webhook.kube import kueue as kube
from webhook.kube.client import REQUEST_TIMEOUT, error_name
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

    async def reconcile(self) -> dict[str, int]:
        """One pass; state -> Workloads written (``Pending``, ``Ready``, ``active``,
        ``error``)."""
        checks = await kube.listed(self.api, kube.ADMISSION_CHECKS)
        if checks is None:
            return {}
        ours = {meta_of(c).name: c for c in checks
                if text(c, "spec", "controllerName") == self.controller}  # fmt: skip
        outcomes: dict[str, int] = {}
        activated = [c for c in ours.values() if condition(c, "Active") != "True"]
        if activated:
            outcomes["active"] = sum([await self._activate(c) for c in activated])
        if not ours:
            return outcomes
        workloads = await kube.listed(self.api, kube.WORKLOADS)
        namespaces = await namespace_labels(self.api)
        if workloads is None or namespaces is None or not await self.reader.begin():
            return outcomes
        delays = {name: await self._max_delay(check) for name, check in ours.items()}
        flying = in_flight(workloads, self.config.kueue.default_runtime_seconds)
        for workload in workloads:
            if finished(workload) or condition(workload, "QuotaReserved") != "True":
                continue
            for entry in items(workload, "status", "admissionChecks"):
                name = text(entry, "name")
                if name not in ours or text(entry, "state") == "Ready":
                    continue
                if not self.gate.leading:
                    return outcomes
                try:
                    state = await self._decide(workload, entry, delays[name], namespaces, flying)
                except NotLeader:
                    return outcomes
                except ApiException as exc:
                    state = "error"
                    metrics.KUEUE_WINDOWS.labels("error").inc()
                    log.warning("kueue_window_failed", workload=meta_of(workload).name,
                                error=error_name(exc))  # fmt: skip
                if state:
                    outcomes[state] = outcomes.get(state, 0) + 1
        return outcomes

    async def _max_delay(self, check: Mapping[str, Any]) -> float | None:
        """The per-check default delay: its CarbonWindow's ``spec.maxDelay``."""
        parameters = "spec", "parameters"
        if (text(check, *parameters, "apiGroup"), text(check, *parameters, "kind")) != (
            PARAMETERS_GROUP, PARAMETERS_KIND,
        ):  # fmt: skip
            return None
        name = text(check, *parameters, "name")
        try:
            found = await client.CustomObjectsApi(self.api).get_cluster_custom_object(
                PARAMETERS_GROUP, PARAMETERS_VERSION, PARAMETERS_PLURAL, name,
                _request_timeout=REQUEST_TIMEOUT,
            )  # fmt: skip
        except ApiException as exc:
            log.warning("carbon_window_parameters_unreadable", check=meta_of(check).name,
                        parameters=name, error=error_name(exc))  # fmt: skip
            return None
        return max_delay_of(found if isinstance(found, Mapping) else None)

    async def _activate(self, check: Obj) -> bool:
        now = self.clock()
        generation = meta_of(check).generation
        kept = [c for c in items(check, "status", "conditions")
                if isinstance(c, Mapping) and c.get("type") != "Active"]  # fmt: skip
        status = {"conditions": [*kept, kube.active_condition(ACTIVE_MESSAGE, now, generation)]}
        try:
            await kube.apply_status(self.api, self.gate, check, kube.ADMISSION_CHECKS,
                                    kind="AdmissionCheck", status=status)  # fmt: skip
        except NotLeader:
            return False
        except ApiException as exc:
            log.warning("carbon_window_not_activated", check=meta_of(check).name,
                        error=error_name(exc))  # fmt: skip
            return False
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
                young = now - job.created < timedelta(seconds=self.config.kueue.round_seconds)
                if not known and job.max_delay is not None and young:
                    return ""  # the feed was just asked for the zone: decide next pass
                state = "Ready" if checked.ready else "Pending"
                message = checked.reason + (f" (grid {zone})" if zone and known else "")
        if (text(entry, "state"), text(entry, "message")) == (state, message):
            return ""
        name = text(entry, "name")
        new = kube.check_state(name, state, message, now, entry)
        await kube.apply_status(self.api, self.gate, workload, kube.WORKLOADS, kind="Workload",
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
