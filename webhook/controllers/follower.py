"""The leader re-evaluates the objects carbonshift manages, so placements follow the grid.

Every ``reevaluate.interval_seconds`` while this replica leads (and at once on becoming
leader), for each kind in :func:`~webhook.kinds.following.targets`: list the objects (all
namespaces), decide each through :class:`webhook.kinds.following.Reevaluation` (the kind's
pure step, :func:`webhook.decision.follow.step`: the kind's own decider, as a refresh
runs it, on the forecast, behind hysteresis, dwell, staleness and the minimum interval)
and write what it asks for by replace with the ``resourceVersion`` read (optimistic
concurrency: a 409 Conflict re-reads and re-decides once, a second one is counted as
``conflict`` and left to the next pass). The admission webhook lets these writes through
untouched (an UPDATE is only re-decided when ``carbonshift.io/refresh`` changes).

Each switch records a ``Normal`` Event ``CarbonRebalanced`` (old -> new expected
intensity and why), a NodePool pause ``NodePoolPaused`` and its end ``NodePoolResumed``
(intensity, why, the forecast's cleaner hour when known); a field the user took back
records one ``Warning`` Event ``CarbonFieldReleased`` (the annotation then remembers it,
so it is said once); a field the API server stored without a part carbonshift wrote (its
schema lacks it: ``overflowAffinities`` before Karmada 1.18) is no user's edit: the object
is decided again in a shape the API keeps and one ``Warning`` Event ``CarbonFieldDropped``,
a warning log line and ``carbonshift_fields_dropped_total{kind,field}`` say so. Metrics:
``carbonshift_reevaluations_total{kind,outcome}``,
``carbonshift_writes_total{kind}``, ``carbonshift_reevaluation_duration_seconds`` and
``carbonshift_paused_nodepools``.

After each pass two keepers see the objects as the pass left them: the
:class:`~webhook.controllers.rebalancer.Rebalancer` (``rebalance.enabled``) asks Karmada to move
replicas of managed ordered fills back to greener tiers where that is worth it, and the
:class:`~webhook.controllers.overlays.OverlayKeeper` prices the NodePools listed with NodeOverlays.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import time
from collections.abc import Callable, Mapping
from typing import Any, Literal

import structlog
from kubernetes_asyncio import client
from kubernetes_asyncio.client.rest import ApiException

from webhook.controllers import overlays
from webhook.controllers.overlays import OverlayKeeper
from webhook.controllers.rebalancer import Fill, PolicyKey, Rebalancer, policy_key
from webhook.controllers.runner import Controller
from webhook.decision import follow
from webhook.decision.karmada import carry
from webhook.decision.record import Record, fingerprint, switches
from webhook.kinds import Context, Kind
from webhook.kinds.following import Outlook, Reevaluation, Target, targets
from webhook.kube.cache import WatchedCache
from webhook.kube.client import (
    FIELD_MANAGER,
    REQUEST_TIMEOUT,
    absent,
    error_name,
    pages,
    refused,
)
from webhook.kube.events import EventRecorder
from webhook.kube.writes import Gate, NotLeader
from webhook.model.config import Config
from webhook.model.objects import EMPTY, meta_of, strings
from webhook.model.vocabulary import DECISION, ENABLED, parse_time
from webhook.runtime import metrics

log = structlog.get_logger("carbonshift.reevaluate")

Obj = dict[str, Any]


class Follower(Controller):
    """Re-evaluates and rewrites managed objects while this replica leads."""

    name = "reevaluate"

    def __init__(
        self,
        api: client.ApiClient,
        config: Config,
        context: Callable[[], Context],
        gate: Gate,
        *,
        events: EventRecorder | None = None,
        followed: tuple[Target, ...] | None = None,
        outlook: Outlook | None = None,
        overlays: WatchedCache[Obj] | None = None,
    ) -> None:
        """``outlook``: the feed's (:meth:`IntensityFeed.outlook`); without it NodePools
        are decided without a forecast. ``overlays``: the watched cache of carbonshift's
        NodeOverlays (:func:`webhook.controllers.overlays.watched`); without it no carbon
        price is kept."""
        self.objects = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.config = config
        self.context = context
        self.gate = gate
        self.events = events
        self.targets = targets() if followed is None else followed
        for target in self.targets:  # the kinds' gauges are exported from the start, at 0
            if (tally := target.following.tally) is not None:
                metrics.tally(tally.name, tally.documentation)
        self.rules = Reevaluation(config, outlook)
        self.interval = config.reevaluate.interval_seconds
        self.rebalancer = (
            Rebalancer(api, config, gate, events=events) if config.rebalance.enabled else None
        )
        self.overlays = OverlayKeeper(api, config, gate, events=events, cache=overlays)
        self._standing = Standing()
        self._held: dict[tuple[str, str], tuple[tuple[object, ...], follow.Action]] = {}
        """(kind, uid) -> the inputs and the ``kept`` action of the last pass: an object
        whose inputs did not change is kept again without deciding (see :meth:`_decide`)."""
        self._seen: dict[tuple[str, str], tuple[tuple[object, ...], follow.Action]] = {}
        """Kind -> the objects this pass listed, as they stand after it (for the rebalancer
        and the carbon price overlays; a kind not listed has no entry)."""

    # --- one pass -------------------------------------------------------------------------

    async def reconcile(self) -> int:
        """Re-evaluate every managed object once; the number written."""
        started = time.monotonic()
        written = 0
        standing = self._standing = Standing()
        self._seen = {}
        try:
            namespaces = await self._namespaces()
            for target in self.targets:
                if not self.gate.leading:
                    break
                if namespaces is not None:
                    written += await self._kind(target, namespaces)
                elif not target.row.namespaced:  # a cluster-scoped kind reads no namespace
                    written += await self._kind(target, EMPTY)
            if self.rebalancer is not None and self.gate.leading:
                ranked = self.rules.ranked(self.context())
                await self.rebalancer.rebalance(standing.fills, ranked, standing.rewritten)
            metrics.LAZY_POLICIES.set(standing.lazy)
            if standing.pools is not None and self.gate.leading:
                written += await self.overlays.keep(standing.pools, self.context())
        except NotLeader:
            pass
        finally:
            self._held, self._seen = self._seen, {}  # objects gone since drop out
            metrics.REEVALUATION_SECONDS.observe(time.monotonic() - started)
        return written

    async def _namespaces(self) -> dict[str, Mapping[str, str]] | None:
        """Opted-in namespaces and their labels (carbonshift's own namespace excluded);
        None when they cannot be listed now."""
        if not any(t.row.namespaced for t in self.targets):
            return {}
        try:
            found = await self.core.list_namespace(
                label_selector=f"{ENABLED}=true", _request_timeout=REQUEST_TIMEOUT
            )
        except ApiException as exc:  # namespaced kinds wait for the next pass
            if not refused(exc, "list", "namespaces"):
                log.warning("reevaluate_list_failed", resource="namespaces", error=error_name(exc))
            return None
        own = self.config.service.namespace
        return {
            ns.metadata.name: dict(strings(ns.metadata.labels))
            for ns in found.items
            if ns.metadata.name != own
        }

    async def _kind(self, target: Target, namespaces: Mapping[str, Mapping[str, str]]) -> int:
        row = target.row
        resource = f"{row.resource}.{row.group}"
        written = counted = 0
        try:  # a page at a time: a pass never holds every object of a kind
            async for page in pages(self.objects, row.group, row.version, row.resource):
                for obj in page:
                    done, stands = await self._each(target, obj, namespaces)
                    if stands is not None:
                        written += done
                        counted += _counts(target, stands)
                        self._stand(row, stands, rewritten=done > 0)
        except ApiException as exc:
            if not (refused(exc, "list", resource) or absent(exc, resource)):
                log.warning("reevaluate_list_failed", resource=resource, error=error_name(exc))
            return written
        tally = target.following.tally
        if tally is not None:
            metrics.tally(tally.name, tally.documentation).set(counted)
        return written

    async def _each(
        self, target: Target, obj: Obj, namespaces: Mapping[str, Mapping[str, str]]
    ) -> tuple[int, Obj | None]:
        """:meth:`_one` for a listed object, a failure logged and counted (the object
        then stands as listed); None: not opted in."""
        row = target.row
        if not self.gate.leading:
            raise NotLeader("not leading")
        meta = meta_of(obj)
        if row.namespaced and meta.namespace not in namespaces:
            return 0, None  # not opted in: never decided by admission either
        obj.setdefault("apiVersion", row.api_version)
        obj.setdefault("kind", row.kind)
        try:
            return await self._one(target, obj, namespaces)
        except (NotLeader, asyncio.CancelledError):
            raise
        except Exception as exc:
            metrics.REEVALUATIONS.labels(row.kind, "error").inc()
            if not refused(exc, "update", f"{row.resource}.{row.group}"):
                log.warning(
                    "reevaluate_failed",
                    kind=row.kind,
                    namespace=meta.namespace,
                    name=meta.name,
                    error=error_name(exc),
                )
            return 0, obj

    def _stand(self, row: Kind, obj: Obj, *, rewritten: bool) -> None:
        """Keep what the keepers after the pass read of ``obj`` as it stands: a policy's
        :class:`~webhook.controllers.rebalancer.Fill`, whether it waits lazily and whether
        this pass rewrote it, a NodePool whole."""
        standing = self._standing
        if row.kind in POLICY_KINDS:
            standing.lazy += _lazy(obj)
            if rewritten:
                standing.rewritten.add(policy_key(obj))
            fill = self.rebalancer.fill(obj) if self.rebalancer is not None else None
            if fill is not None:
                standing.fills.append(fill)
        elif row.kind == overlays.FOLLOWS:
            standing.pools = [*(standing.pools or ()), obj]

    def _decide(
        self, target: Target, obj: Mapping[str, Any], namespaces: Mapping[str, Mapping[str, str]]
    ) -> tuple[follow.Action, bool]:
        """The step's action for ``obj``, and False when it is the verdict held from the
        last pass (nothing it depends on changed)."""
        meta = meta_of(obj)
        labels = namespaces.get(meta.namespace, {})
        ctx = self.context()
        uid, version = meta.uid, meta.resource_version
        if not uid or not version or ctx.generation is None:
            return self.rules.decide(target, obj, ctx, labels), True
        # What the decision reads besides the clock: the object as stored, the intensities
        # and forecasts (the feed's generation), the fleet, Liqo's peers, the labels.
        peers = id(ctx.peers) if ctx.peers is not None else 0
        inputs = (version, ctx.generation, ctx.fleet_generation, peers, tuple(labels.items()))
        slot = (target.row.kind, uid)
        held = self._held.get(slot)
        if held is not None and held[0] == inputs:
            action = held[1]
            if action.holds_until is None or ctx.now < action.holds_until:
                self._seen[slot] = held
                return action, False
        action = self.rules.decide(target, obj, ctx, labels)
        if action.outcome == "kept":
            self._seen[slot] = (inputs, action)
        return action, True

    async def _one(
        self, target: Target, obj: Obj, namespaces: Mapping[str, Mapping[str, str]]
    ) -> tuple[int, Obj]:
        """Re-evaluate one object; 1 when it was written, and the object as it stands."""
        row = target.row
        for attempt in range(2):
            action, fresh = self._decide(target, obj, namespaces)
            if action.outcome == "skipped":
                return 0, obj
            if not action.changes:
                metrics.REEVALUATIONS.labels(row.kind, action.outcome).inc()
                if fresh:  # a held verdict: this resourceVersion was looked at already
                    await self._announce_missed(row, obj)
                return 0, obj
            if not self.gate.leading:
                raise NotLeader("not leading")
            try:
                stored = await self._replace(row, action.applied(obj))
            except ApiException as exc:
                if exc.status != 409:
                    raise
                metrics.KUBE_CONFLICTS.labels(f"{row.resource}.{row.group}").inc()
                if attempt == 1:
                    metrics.REEVALUATIONS.labels(row.kind, "conflict").inc()
                    log.info("reevaluate_conflict", kind=row.kind, name=_name(obj))
                    return 0, obj
                obj = await self._read(row, obj)  # someone wrote first: decide again on it
                continue
            metrics.WRITES.labels(row.kind).inc()
            outcome = "lazy" if action.outcome == "switched" and carry.lazy(stored) else None
            metrics.REEVALUATIONS.labels(row.kind, outcome or action.outcome).inc()
            await self._tell(row, stored, action)
            return 1, stored
        return 0, obj  # pragma: no cover - the loop always returns

    async def _read(self, row: Kind, obj: Mapping[str, Any]) -> Obj:
        meta = meta_of(obj)
        name, namespace = meta.name, meta.namespace
        if row.namespaced:
            got = await self.objects.get_namespaced_custom_object(
                row.group, row.version, namespace, row.resource, name,
                _request_timeout=REQUEST_TIMEOUT,
            )  # fmt: skip
        else:
            got = await self.objects.get_cluster_custom_object(
                row.group, row.version, row.resource, name, _request_timeout=REQUEST_TIMEOUT
            )
        result: Obj = got
        return result

    async def _replace(self, row: Kind, body: Obj) -> Obj:
        """Replace with the ``resourceVersion`` the object was read with (409 if stale)."""
        meta = body["metadata"]
        options: dict[str, Any] = {
            "field_manager": FIELD_MANAGER,
            "_request_timeout": REQUEST_TIMEOUT,
        }
        if row.namespaced:
            got = await self.objects.replace_namespaced_custom_object(
                row.group, row.version, meta["namespace"], row.resource, meta["name"], body,
                **options,
            )  # fmt: skip
        else:
            got = await self.objects.replace_cluster_custom_object(
                row.group, row.version, row.resource, meta["name"], body, **options
            )
        result: Obj = got
        return result

    async def _announce_missed(self, row: Kind, obj: Obj) -> None:
        """Record the Event of the object's last switch if it is recent and its Event is
        missing: a leader that died between its write and its Event leaves that to the
        next one. The Event's name is fixed by the switch, so it is never doubled."""
        entry = _last_switch(obj)
        if self.events is None or entry is None:
            return
        with contextlib.suppress(ValueError):
            at = parse_time(str(entry.get("t")))
            age = (datetime.datetime.now(datetime.UTC) - at).total_seconds()
            if age > 2 * self.interval + 60:
                return
            obj.setdefault("apiVersion", row.api_version)
            obj.setdefault("kind", row.kind)
            pause = str(entry.get("pause"))
            named = row.following.events if row.following is not None else {}
            if pause in named:
                (reason, verb), note = named[pause], f"carbonshift: {pause} at {entry['t']}"
            elif carry.lazy(obj):
                (reason, verb), note = LAZY, f"{LAZY_NOTE} (switched at {entry['t']})"
            else:
                reason, verb = REBALANCED
                note = f"switched at {entry['t']}"
                if "before" in entry and "after" in entry:
                    note += f": expected intensity {entry['before']} -> {entry['after']} g/kWh"
            await self.events.emit(obj, reason=reason, note=note, action=verb, key=_key(obj))

    async def _tell(self, row: Kind, stored: Obj, action: follow.Action) -> None:
        """Log line and Event for a write."""
        stored.setdefault("apiVersion", row.api_version)
        stored.setdefault("kind", row.kind)
        name = _name(stored)
        key: str | None = _key(stored)
        kind: Literal["Normal", "Warning"] = "Normal"
        named = row.following.events if row.following is not None else {}
        if action.pause is not None and action.pause in named:
            (reason, verb), note = named[action.pause], f"carbonshift: {action.pause}"
            log.info("nodepool_" + action.pause, name=name, reason=action.reason)
        elif action.outcome == "dropped":
            reason, verb, note, kind, key = DROPPED, "Reshape", "carbonshift", "Warning", None
            for part in action.dropped.values():
                metrics.FIELDS_DROPPED.labels(row.kind, part).inc()
            log.warning(
                "field_dropped",
                kind=row.kind,
                name=name,
                dropped=dict(action.dropped),
                reason=action.reason,
                hint="the API server pruned it (its policy CRD lacks the field): karmada.version "
                "may name a newer Karmada than the one running",
            )
        elif action.outcome == "switched" and carry.lazy(stored):
            (reason, verb), note = LAZY, LAZY_NOTE
            log.info("placement_deferred", kind=row.kind, name=name, reason=action.reason)
        elif action.outcome == "switched":
            (reason, verb), note = REBALANCED, "placement switched"
            log.info("placement_switched", kind=row.kind, name=name, reason=action.reason)
        elif action.outcome == "user_owned":
            reason, verb, note, kind, key = (
                "CarbonFieldReleased",
                "Release",
                "carbonshift",
                "Warning",
                None,
            )
            log.warning("field_released", kind=row.kind, name=name, reason=action.reason)
        else:
            return
        if self.events is not None:
            await self.events.emit(
                stored, reason=reason, note=f"{note}: {action.reason}", action=verb, type=kind,
                key=key,
            )  # fmt: skip

    def lost(self) -> None:
        self.overlays.forget()  # a new term reads the overlays as the watch delivered them
        self._held.clear()

    def describe(self) -> dict[str, Any]:
        return {
            "min_interval_seconds": self.config.reevaluate.min_interval_seconds,
            "forecast": self.config.reevaluate.forecast,
            "kinds": [t.row.kind for t in self.targets],
        }


@dataclasses.dataclass(slots=True)
class Standing:
    """What one pass leaves for the keepers after it (the rebalancer, the carbon price
    overlays and the lazy policies' gauge), kept as each page is decided."""

    fills: list[Fill] = dataclasses.field(default_factory=list)
    lazy: int = 0
    rewritten: set[PolicyKey] = dataclasses.field(default_factory=set)
    """The policies this pass wrote: Karmada schedules their bindings again by itself."""
    pools: list[Obj] | None = None
    """The NodePools as they stand; None: not listed this pass."""


def _name(obj: Mapping[str, Any]) -> str:
    return meta_of(obj).namespaced_name


def _counts(target: Target, obj: Obj) -> int:
    """1 when the kind's gauge counts ``obj``."""
    tally = target.following.tally
    return int(tally is not None and tally.counts(obj))


POLICY_KINDS = ("PropagationPolicy", "ClusterPropagationPolicy")
REBALANCED = ("CarbonRebalanced", "Rebalance")
DROPPED = "CarbonFieldDropped"
"""The API server stored a field carbonshift wrote without a part of it: decided again."""
LAZY = ("CarbonPolicyLazy", "Defer")
LAZY_NOTE = (
    "placement rewritten, not applied yet: activationPreference Lazy makes Karmada wait for "
    "a change of the resource template"
)


def _lazy(policy: Obj) -> bool:
    """A managed policy Karmada applies only once its resource template changes."""
    return DECISION in meta_of(policy).annotations and carry.lazy(policy)


def _last_switch(obj: Obj) -> dict[str, Any] | None:
    """The last switch recorded in the object's decision annotation, if any."""
    annotations = meta_of(obj).annotations
    done = switches(Record.decode(annotations.get(DECISION)))
    return done[-1] if done else None


def _key(obj: Obj) -> str | None:
    """The Event name suffix of the object's last switch: its uid and the switch's time."""
    entry = _last_switch(obj)
    if entry is None:
        return None
    return fingerprint([meta_of(obj).uid or None, entry.get("t")])
