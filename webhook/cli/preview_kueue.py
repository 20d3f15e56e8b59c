"""Kueue in the offline preview: what the leader's Kueue controllers would decide.

carbonshift's webhook does not admit Kueue objects: its leader keeps an opted-in
``MultiKueueConfig``'s ``spec.clusters`` in carbon order (``kueue.dispatch: order``,
:mod:`webhook.controllers.kueue.dispatch`), nominates a Job's workers (``external``) and
answers the carbon window admission check of its Workload
(:mod:`webhook.controllers.kueue.carbon_window`). ``carbonshift mutate`` shows what they would
decide, through the rules they call (:mod:`webhook.decision.kueue`: :func:`order`,
:func:`nominate`, :func:`window_zone`, :func:`window`) and the reader's own job and
outlook code (:class:`webhook.controllers.kueue.fleet.KueueReader`), on what the preview
holds: the config, the feed, and the objects in the input (``MultiKueueCluster`` labels
give workers' grid zones, a ``MultiKueueConfig`` the Job's workers). What only the live
manager and workers know (each worker's room, the Workload's state, a ``CarbonWindow``'s
delay) is said in a note.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, cast

from webhook.controllers.kueue.dispatch import ORDERED_AT
from webhook.controllers.kueue.fleet import KueueReader, decision_of, since_of, zone_label
from webhook.controllers.runner import Feed
from webhook.decision import kueue as rules
from webhook.decision.optin import not_opted_in
from webhook.decision.ranking import order_greenest
from webhook.kube.kueue import GROUP
from webhook.model import vocabulary
from webhook.model.config import Config
from webhook.model.objects import Obj, items, mapping
from webhook.model.validation import InvalidInput

QUEUE_NAME = "kueue.x-k8s.io/queue-name"
"""The label that hands a Job to Kueue (its LocalQueue)."""
MAX_EXEC_TIME = "kueue.x-k8s.io/max-exec-time-seconds"
"""The Job label Kueue copies to its Workload's ``spec.maximumExecutionTimeSeconds``."""
ROOMY = Decimal(10) ** 12
"""The quota a worker is given offline: the preview cannot read the workers' queues."""
ROOM_NOTE = (
    "depends on the live cluster: each worker's room (its ClusterQueue's quota less what "
    "it has reserved and the Jobs nominated there), which the preview cannot read, is "
    "assumed free; a worker without room for the Job goes after those with room"
)

Labels = Mapping[str, str]


@dataclasses.dataclass(frozen=True, slots=True)
class Answer:
    """What the preview says of one Kueue object."""

    result: str
    reason: str
    stored: Mapping[str, Any]
    decision: Mapping[str, Any] | None = None
    """The ``carbonshift.io/decision`` the leader would record (on the MultiKueueConfig,
    or on the Job's Workload)."""
    details: tuple[tuple[str, str], ...] = ()
    """``(label, text)`` lines: the order, where and when."""
    notes: tuple[str, ...] = ()


def handles(doc: Mapping[str, Any]) -> str | None:
    """``order`` for a MultiKueueConfig, ``window`` for a Job Kueue queues; else None."""
    view = Obj(doc)
    if view.group == GROUP and view.kind == "MultiKueueConfig":
        return "order"
    if view.api_version == "batch/v1" and view.kind == "Job" and view.meta.labels.get(QUEUE_NAME):
        return "window"
    return None


def _g(value: float | None) -> str:
    return "no data" if value is None else f"{value:.0f} g/kWh"


class Offline:
    """The Kueue controllers' view of the input (see the module's docstring)."""

    def __init__(
        self, config: Config, feed: Feed, documents: Iterable[Mapping[str, Any]], now: datetime
    ) -> None:
        self.config = config
        self.now = now
        # The reader's job and outlook code, without a manager: nothing here lists objects.
        self.reader = KueueReader(cast(Any, None), config, feed, cast(Any, None))
        self.labelled: dict[str, str | None] = {}
        self.multikueue_configs: list[Mapping[str, Any]] = []
        for doc in documents:
            view = Obj(doc)
            if view.group != GROUP or not view.meta.name:
                continue
            if view.kind == "MultiKueueCluster":
                self.labelled[view.meta.name] = zone_label(doc)
            elif view.kind == "MultiKueueConfig":
                self.multikueue_configs.append(doc)

    def cluster(self, doc: Mapping[str, Any]) -> str | None:
        """The reason for a MultiKueueCluster of the input (None: not one)."""
        view = Obj(doc)
        if view.group != GROUP or view.kind != "MultiKueueCluster":
            return None
        zone, where = self.zone_of(view.meta.name)
        said = f"grid zone {zone} ({where})" if zone else where
        return f"MultiKueue worker {view.meta.name}: {said}"

    def zones(self) -> set[str]:
        """The grid zones the input's MultiKueueClusters name (for the feed to fetch)."""
        return {z for z in self.labelled.values() if z}

    def zone_of(self, worker: str) -> tuple[str | None, str]:
        """A worker's grid zone as the leader resolves it (its MultiKueueCluster's label,
        else ``clusters.<name>``), and where it came from."""
        labelled = self.labelled.get(worker)
        if labelled:
            return labelled, f"MultiKueueCluster {worker} {vocabulary.ZONE}"
        entry = self.config.clusters.get(worker)
        zone = entry.grid_zone if entry is not None else None
        if zone:
            return zone, f"config clusters.{worker}"
        return None, (
            f"no grid zone: label MultiKueueCluster {worker} {vocabulary.ZONE} or add "
            f"clusters.{worker} to the config; it ranks last"
        )

    def _zones(self, names: Iterable[str]) -> tuple[dict[str, str | None], str]:
        zones: dict[str, str | None] = {}
        said = []
        for name in names:
            zones[name], where = self.zone_of(name)
            said.append(f"{name} {zones[name]} ({where})" if zones[name] else f"{name}: {where}")
        return zones, "; ".join(said)

    def _enabled_note(self) -> list[str]:
        if self.config.kueue.enabled:
            return []
        return [
            "the leader runs its Kueue controllers only with kueue.enabled: true (this "
            "config leaves it false): this is what they would decide"
        ]

    # --- MultiKueueConfig: the carbon order --------------------------------------------

    def order(self, doc: Mapping[str, Any]) -> Answer:
        """What the leader's ``order`` pass would write into ``doc`` now."""
        why = not_opted_in(doc, None)
        if why is not None:
            return Answer("skipped", why, doc)
        names = [n for n in items(doc, "spec", "clusters") if isinstance(n, str)]
        zones, where = self._zones(names)
        workers = [rules.Worker(n, z, {}) for n, z in zones.items()]
        hours = rules.hours_of(timedelta(seconds=self.config.kueue.default_runtime_seconds))
        outlooks, readings = self.reader.outlooks(zones.values(), hours)
        since = since_of(doc, ORDERED_AT)
        held = math.inf if since is None else (self.now - since).total_seconds() / 3600
        proposed, reason = rules.order(
            names, workers, outlooks, held, self.config.hysteresis, hours=hours, readings=readings
        )
        means = rules.worker_means(workers, outlooks, hours, readings)
        ranked = " -> ".join(f"{n} {_g(means[n])}" for n in order_greenest(means))
        details = (
            ("carbon order", f"{ranked} (mean over the next {hours}h, kueue.default_runtime_"
                             "seconds)"),
            ("zones", where),
        )  # fmt: skip
        notes = [
            *self._enabled_note(),
            "depends on the live cluster: Kueue's incremental dispatcher nominates stepSize "
            "workers per round in this order, and which one admits a Job depends on their "
            "room (ClusterQueue quota), which the preview cannot read",
        ]
        mode = self.config.kueue.dispatch
        if mode != "order":
            why = f"kueue.dispatch is {mode}: the leader orders MultiKueueConfigs only with " \
                  "dispatch: order"  # fmt: skip
            return Answer("unchanged", f"{why}; {reason}", doc, None, details, tuple(notes))
        if proposed is None:
            return Answer("kept", reason, doc, decision_of(doc) or None, details, tuple(notes))
        recorded = {**decision_of(doc), "order": proposed, "reason": reason,
                    ORDERED_AT: vocabulary.format_time(self.now)}  # fmt: skip
        stored = copy.deepcopy(dict(doc))
        stored["spec"] = {**mapping(doc, "spec"), "clusters": proposed}
        meta = stored.setdefault("metadata", {})
        meta["annotations"] = {
            **mapping(doc, "metadata", "annotations"),
            vocabulary.DECISION: json.dumps(recorded, sort_keys=True),
        }
        return Answer("ordered", reason, stored, recorded, details, tuple(notes))

    # --- a Job: where and when -----------------------------------------------------------

    def window(self, doc: Mapping[str, Any], namespace: Labels) -> Answer:
        """Which worker the Job's Workload would go to first, and whether the carbon window
        holds it (until when and why). ``namespace``: its namespace's labels."""
        view = Obj(doc)
        notes = self._enabled_note()
        why = not_opted_in(doc, namespace)
        if why is not None:
            return Answer(
                "ready",
                f"carbonshift leaves it alone: {why}",
                doc,
                notes=(
                    *notes,
                    "not held by the carbon window; with kueue.dispatch: external every "
                    "active worker of its MultiKueueConfig is nominated at once",
                ),
            )
        workload = workload_of(doc, self.now)
        try:
            job = self.reader.job_of(workload, view.meta.annotations)
        except InvalidInput as exc:
            notes.append(
                "with kueue.dispatch: external it is nominated to every active worker at once, "
                "and a Warning Event names the annotation"
            )
            return Answer("ready", f"not held: {exc}", doc, notes=tuple(notes))
        names, source = self._workers()
        zones, where = self._zones(names)
        details: list[tuple[str, str]] = []
        decision: dict[str, Any] = {}
        zone: str | None = self.config.zone
        first: tuple[str, str | None] | None = None
        if names:
            quota = dict.fromkeys(job.requests, ROOMY) or {"cpu": ROOMY}
            workers = [rules.Worker(n, z, quota) for n, z in zones.items()]
            outlooks, readings = self.reader.outlooks(zones.values(), job.hours)
            nomination = rules.nominate(job, workers, outlooks, (), rounds=0,
                                        step=self.config.kueue.step, readings=readings)  # fmt: skip
            first = rules.window_zone(job, workers, outlooks, (), readings=readings)
            zone = first[1] if first is not None else None
            details.append(("where", self._where(nomination)))
            details.append(("workers", f"{source}: {where}"))
            decision.update(rules.record(nomination, zones=zones))
            notes.append(ROOM_NOTE)
        else:
            local = zone or "(none: zone unset)"
            details.append(("where", f"no MultiKueue worker known ({source}): the window is "
                                     f"judged on the local zone {local}"))  # fmt: skip
        checked = self._checked(job, zone)
        decision.update(rules.record(checked=checked))
        on = f" (grid {zone})" if zone else ""
        worker = f" on {first[0]}" if first is not None else ""
        if checked.ready:
            details.insert(0, ("when", f"starts at once{worker}{on}"))
        else:
            until = vocabulary.format_time(checked.until) if checked.until else "?"
            details.insert(0, ("when", f"waits until {until}{worker}{on}"))
        if job.max_delay is None or vocabulary.MAX_DELAY not in view.meta.annotations:
            notes.append(
                "depends on the live cluster: without carbonshift.io/max-delay on the Job, the "
                "delay is the spec.maxDelay of the CarbonWindow its AdmissionCheck names, else "
                "kueue.default_max_delay_seconds"
            )
        notes.append(
            "depends on the live cluster: the window is answered once Kueue reserved quota "
            "for the Job's Workload on the manager; created "
            f"{vocabulary.format_time(job.created)}, deadline "
            + (vocabulary.format_time(job.deadline) if job.deadline else "none (no max-delay)")
        )
        result = "ready" if checked.ready else "pending"
        return Answer(result, f"carbon window: {checked.reason}{on}", doc, decision,
                      tuple(details), tuple(notes))  # fmt: skip

    def _workers(self) -> tuple[list[str], str]:
        """The workers a Job may run on offline, and where they come from."""
        if len(self.multikueue_configs) == 1:
            (found,) = self.multikueue_configs
            names = [n for n in items(found, "spec", "clusters") if isinstance(n, str)]
            return names, f"the clusters of MultiKueueConfig {Obj(found).meta.name} in the input"
        several = " (several in the input: which one is the Job's is read live)"
        why = several if self.multikueue_configs else " (no MultiKueueConfig in the input)"
        return list(self.config.clusters), f"the config's clusters{why}"

    def _where(self, nomination: rules.Nomination) -> str:
        mode = self.config.kueue.dispatch
        if mode == "external":
            names = ", ".join(nomination.names) or "none"
            return f"nominated {names}: {nomination.reason}"
        if mode == "order":
            ranked = ", ".join(nomination.ranked)
            return (f"kueue.dispatch order: Kueue's incremental dispatcher in the "
                    f"MultiKueueConfig's order (carbon order: {ranked})")  # fmt: skip
        return "kueue.dispatch none: Kueue's own dispatcher chooses"

    def _checked(self, job: rules.Job, zone: str | None) -> rules.Window:
        """The carbon window on ``zone``'s outlook over the delay the job has left."""
        if not zone:
            return rules.window(job, None, self.now)
        deadline = job.deadline
        slack = 0.0 if deadline is None else max(0.0, (deadline - self.now) / timedelta(hours=1))
        outlooks, _ = self.reader.outlooks([zone], job.hours + math.ceil(slack))
        return rules.window(job, outlooks.get(zone), self.now)


def workload_of(job: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """The Workload Kueue makes of a Job (its pod set, its run time), created now unless
    the Job says when it was."""
    view = Obj(job)
    spec = view.spec
    count = spec.get("parallelism")
    count = count if isinstance(count, int) and not isinstance(count, bool) else 1
    completions = spec.get("completions")
    if isinstance(completions, int) and not isinstance(completions, bool):
        count = min(count, completions)
    created = view.meta.raw.get("creationTimestamp") or vocabulary.format_time(now)
    workload_spec: dict[str, Any] = {
        "queueName": view.meta.labels.get(QUEUE_NAME, ""),
        "podSets": [{"name": "main", "count": count, "template": spec.get("template")}],
    }
    seconds = view.meta.labels.get(MAX_EXEC_TIME, "")
    if seconds.isdigit():
        workload_spec["maximumExecutionTimeSeconds"] = int(seconds)
    return {
        "metadata": {
            "name": f"job-{view.meta.name}",
            "namespace": view.meta.namespace or "default",
            "creationTimestamp": created,
        },
        "spec": workload_spec,
    }
