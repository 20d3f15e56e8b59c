"""The leader re-evaluates the objects carbonshift manages, so placements follow the grid.

A keyed controller (:class:`~webhook.controllers.runner.KeyedController`): the key is an
object (its kind and ``namespace/name``). For each kind in
:func:`~webhook.kinds.reevaluation.targets` a watched cache holds the objects that carry a
decision (compactly: their stored bytes), and one holds the opted-in Namespaces. An object
is decided again when it changes (a watch event), when its namespace's labels change, when
what decisions read changes (the feed's readings and forecasts, the fleet and its room,
Liqo's peers: :meth:`Follower.poll`), when a hold it waits on ends (a dwell, the minimum
interval), and every ``reevaluate.interval_seconds`` as a safety net (an object whose
inputs did not change keeps its verdict without being decided: that costs microseconds).
Each decision goes through :class:`webhook.kinds.reevaluation.Reevaluation` (the kind's pure
step, :func:`webhook.decision.follow.step`: the kind's own decider, as a refresh runs it,
on the forecast, behind hysteresis, dwell, staleness and the minimum interval) and what it
asks for is written by replace with the ``resourceVersion`` read (optimistic concurrency:
a 409 Conflict re-reads and re-decides once, a second one is counted as ``conflict`` and
left to the next change). The admission webhook lets these writes through untouched (an
UPDATE is only re-decided when ``carbonshift.io/refresh`` changes).

Each switch records a ``Normal`` Event ``CarbonRebalanced`` (old -> new expected
intensity and why), a NodePool pause ``NodePoolPaused`` and its end ``NodePoolResumed``
(intensity, why, the forecast's cleaner hour when known); a field the user took back
records one ``Warning`` Event ``CarbonFieldReleased`` (the annotation then remembers it,
so it is said once); a field the API server stored without a part carbonshift wrote (its
schema lacks it: ``overflowAffinities`` before Karmada 1.18) is no user's edit: the object
is decided again in a shape the API keeps and one ``Warning`` Event ``CarbonFieldDropped``,
a warning log line and ``carbonshift_fields_dropped_total{kind,field}`` say so. Metrics:
``carbonshift_reevaluations_total{kind,outcome}``,
``carbonshift_writes_total{kind}``, ``carbonshift_reevaluation_duration_seconds`` (one
object) and ``carbonshift_paused_nodepools``.

After each decision the keepers of the object's kind hear how it stands
(:class:`~webhook.controllers.keeper.Keeper`, registered by the integrations' rows: Karmada's
rebalancer, Karpenter's carbon prices) and run once the queue has settled. A switch a
keeper says otherwise (Karmada's lazy activation) is counted, logged and recorded as the
keeper says. This module names no technology.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any, Literal

import lz4.block
import orjson
import structlog
from kubernetes_asyncio import client
from kubernetes_asyncio.client.rest import ApiException

from webhook.controllers.keeper import Keeper, Switched
from webhook.controllers.runner import Cache, KeyedController
from webhook.decision import follow
from webhook.decision.record import Record, fingerprint, switches
from webhook.kinds import Context, Kind
from webhook.kinds.reevaluation import Outlook, Reevaluation, SpreadOf, Target, targets
from webhook.kube.cache import Head, WatchedCache
from webhook.kube.client import (
    FIELD_MANAGER,
    REQUEST_TIMEOUT,
    error_name,
    refused,
)
from webhook.kube.events import EventRecorder
from webhook.kube.watch import CoreObjects
from webhook.kube.writes import Gate, NotLeader
from webhook.model.config import Config
from webhook.model.intensity import IntensityTable
from webhook.model.objects import EMPTY, meta_of, strings
from webhook.model.resources import Resource
from webhook.model.vocabulary import DECISION, ENABLED, parse_time
from webhook.runtime import metrics
from webhook.runtime.workqueue import WorkQueue

log = structlog.get_logger("carbonshift.reevaluate")

Obj = dict[str, Any]
Key = tuple[str, str]
"""A managed object: its kind and its cache key (``namespace/name``, or ``name``)."""
NAMESPACES_SECONDS = 5.0
"""How soon a namespaced object is looked at again while the opted-in namespaces cannot
be listed."""


def _packed(data: bytes | memoryview) -> bytes:
    """An object's JSON as the caches hold it: LZ4-compressed (about 40 %; a tenth of
    zlib's CPU to pack and unpack, which a first sync does to every object)."""
    packed: bytes = lz4.block.compress(data, store_size=True)
    return packed


def _unpacked(held: bytes) -> Obj:
    """The object :func:`_packed` held."""
    obj: Obj = orjson.loads(lz4.block.decompress(held))
    return obj


def _every(obj: Mapping[str, Any], _before: bytes | None) -> bytes:
    """An object as the cache holds it, managed or not, for a kind a keeper reads every
    object of (packed, as :func:`_managed`)."""
    return _packed(orjson.dumps(obj))


def _every_listed(data: memoryview, _head: Head, _before: bytes | None) -> bytes:
    """:func:`_every` of a listed object, from the JSON the API server sent."""
    return _packed(data)


def _managed(obj: Mapping[str, Any], _before: bytes | None) -> bytes | None:
    """What the cache holds of an object: its JSON, packed (:func:`_packed`), when it
    carries a decision (the only objects a re-evaluation decides), else None (a few bytes
    per object)."""
    if DECISION not in meta_of(obj).annotations:
        return None
    return _packed(orjson.dumps(obj))


def _managed_listed(data: memoryview, head: Head, _before: bytes | None) -> bytes | None:
    """:func:`_managed` of a listed object, from the JSON the API server sent (only its
    head parsed)."""
    return _packed(data) if DECISION in head.annotations else None


def _labels(obj: Mapping[str, Any], _before: Mapping[str, str] | None) -> Mapping[str, str]:
    """A Namespace as the cache holds it: its labels."""
    return dict(strings(meta_of(obj).labels))


def _changed_zones(before: IntensityTable | None, after: IntensityTable | None) -> set[str]:
    """Zones whose entry differs between two intensity tables (a reading replaced or
    turned stale, a forecast mean moved)."""
    if before is after:
        return set()
    old = EMPTY if before is None else before
    new = EMPTY if after is None else after
    return {z for z in old.keys() | new.keys() if old.get(z) != new.get(z)}


def _zone_state(zones: tuple[str, ...], ctx: Context) -> tuple[object, ...]:
    """What a decision that read ``zones`` saw of them: their readings and ranking."""
    table, ranked = ctx.table, EMPTY if ctx.ranked is None else ctx.ranked
    return tuple((table.get(z), ranked.get(z)) for z in zones)


class Follower(KeyedController[Key]):
    """Re-evaluates and rewrites managed objects while this replica leads."""

    name = "reevaluate"
    workers = 4
    """Objects decided at once (their writes overlap; decisions take turns on the loop)."""

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
        spread: SpreadOf | None = None,
    ) -> None:
        """``outlook``: the feed's (:meth:`IntensityFeed.outlook`); without it NodePools
        are decided without a forecast; ``spread``: its past errors
        (:meth:`IntensityFeed.spread`). The keepers register themselves
        (:class:`~webhook.controllers.keeper.Keeper`)."""
        self.api = api
        self.objects = client.CustomObjectsApi(api)
        self.config = config
        self.context = context
        self.gate = gate
        self.events = events
        self.targets = targets() if followed is None else followed
        self._by_kind = {t.row.kind: t for t in self.targets}
        for target in self.targets:  # the kinds' gauges are exported from the start, at 0
            if (tally := target.following.tally) is not None:
                metrics.tally(tally.name, tally.documentation)
        self.rules = Reevaluation(config, outlook, spread)
        self.interval = config.reevaluate.interval_seconds
        self.stored: dict[str, WatchedCache[bytes | None]] = {
            t.row.kind: WatchedCache(
                t.row.api,
                _managed,
                kind=t.row.kind.lower(),
                on_keys=functools.partial(self._objects_changed, t.row.kind),
                raw=_managed_listed,
            )
            for t in self.targets
        }
        self.namespaces: WatchedCache[Mapping[str, str]] | None = None
        if any(t.row.namespaced for t in self.targets):
            self.namespaces = WatchedCache(
                Resource("", "v1", "namespaces", "Namespace"),
                _labels,
                kind="namespace",
                objects=CoreObjects.of("list_namespace"),
                label_selector=f"{ENABLED}=true",
                on_keys=self._namespaces_changed,
            )
        self._caches: tuple[Cache, ...] = (
            *self.stored.values(),
            *([self.namespaces] if self.namespaces else []),
        )
        self._opted: tuple[Mapping[str, Mapping[str, str]], Mapping[str, Any]] | None = None
        """The namespaces' view :meth:`_opted_in` last read, and what it made of it."""
        self.counted: dict[str, set[Key]] = {}
        """Kind -> the objects its gauge counts (:attr:`~webhook.kinds.base.Following.tally`)."""
        self.keepers: list[Keeper] = []
        self.queue = WorkQueue()
        self.written = 0
        """Objects written since the replica started (for tests and benchmarks)."""
        self._held: dict[Key, tuple[tuple[object, ...], tuple[object, ...], follow.Action]] = {}
        """Key -> the inputs and the ``kept`` action it was last decided with: an object
        whose inputs did not change is kept again without deciding (see :meth:`_decide`)."""
        self._inputs: tuple[object, ...] | None = None
        """What every decision reads besides the object, as :meth:`poll` last saw it."""
        self._tables: tuple[IntensityTable, IntensityTable | None] | None = None
        """The intensities and the forecast ranking :meth:`poll` last saw."""
        self._reads: dict[Key, tuple[str, ...]] = {}
        """Key -> the zones its last decision read (sorted; one tuple shared per set)."""
        self._zonesets: dict[frozenset[str], tuple[str, ...]] = {}
        self._states: (
            tuple[IntensityTable, IntensityTable | None, dict[tuple[str, ...], tuple[object, ...]]]
            | None
        ) = None
        """The zones' readings per set of zones, for the table they were read from."""

    def add(self, keeper: Keeper) -> None:
        """Tell ``keeper`` how the objects of its kinds stand from now on (its caches are
        started with the follower's)."""
        self.keepers.append(keeper)
        for kind in keeper.every & self.stored.keys():
            self.stored[kind].decode = _every
            self.stored[kind].raw = _every_listed

    @property
    def caches(self) -> tuple[Cache, ...]:  # type: ignore[override]
        """The follower's watched caches and its keepers'."""
        return (*self._caches, *(c for keeper in self.keepers for c in keeper.caches))

    @property
    def inputs(self) -> tuple[object, ...] | None:
        """What every decision reads besides the object, as :meth:`poll` last saw it."""
        return self._inputs

    # --- which keys ----------------------------------------------------------------------

    def keys(self) -> list[Key]:
        return [
            (kind, key)
            for kind, cache in self.stored.items()
            for key, held in cache.items().items()
            if held is not None
        ]

    def synced(self) -> bool:
        """A term starts once a kind's objects are listed: a kind the API server refuses
        to list (RBAC) or cannot list now holds up no other; its objects are queued when
        its cache syncs."""
        return any(cache.synced for cache in self.stored.values())

    def _objects_changed(self, kind: str, keys: Collection[str]) -> None:
        self.enqueue((kind, key) for key in keys)

    def _namespaces_changed(self, names: Collection[str]) -> None:
        """A namespace opted in or out, or its labels changed: its objects."""
        changed = set(names)
        self.enqueue(
            (kind, key)
            for kind, cache in self.stored.items()
            if self._by_kind[kind].row.namespaced
            for key in cache.items()
            if key.partition("/")[0] in changed
        )

    def poll(self) -> None:
        """What decisions read besides the object changed: after a feed refresh, decide
        again the objects whose last decision read a zone whose reading or forecast
        changed (and those not decided yet); after a change of the fleet or of Liqo's
        peers, every object (those whose inputs did not change keep their verdict)."""
        ctx = self.context()
        peers = id(ctx.peers) if ctx.peers is not None else 0
        inputs = (ctx.generation, ctx.fleet_generation, peers)
        if inputs == self._inputs:
            return
        before, tables = self._inputs, self._tables
        self._inputs, self._tables = inputs, (ctx.table, ctx.ranked)
        if before is None:
            return
        if before[1:] != inputs[1:] or tables is None:
            self.enqueue(self.keys())
            return
        changed = _changed_zones(tables[0], ctx.table) | _changed_zones(tables[1], ctx.ranked)
        if changed:
            reads = self._reads
            self.enqueue(
                key for key in self.keys()
                if (zones := reads.get(key)) is None or not changed.isdisjoint(zones)
            )  # fmt: skip

    def settled(self) -> None:
        """What this term decided has been written: the kinds' gauges say it, and the
        keepers look at it now."""
        self._tallies()
        for keeper in self.keepers:
            keeper.settle()

    def _tallies(self) -> None:
        for target in self.targets:
            if (tally := target.following.tally) is not None:
                counted = self.counted.get(target.row.kind, ())
                metrics.tally(tally.name, tally.documentation).set(len(counted))

    def lost(self) -> None:
        self._held.clear()
        self._reads.clear()
        self._inputs = self._tables = None

    # --- one object ----------------------------------------------------------------------

    async def reconcile(self, key: Key) -> float | None:
        """Decide one object again and write what the decision asks for; seconds until
        it is looked at again (a hold ending, else the safety net)."""
        kind, name = key
        target = self._by_kind[kind]
        row = target.row
        held = self.stored[kind].get(name)
        if row.namespaced and self.namespaces is not None and not self.namespaces.synced:
            return NAMESPACES_SECONDS  # which namespaces opted in is not known yet
        namespaces = self._opted_in()
        namespace = name.partition("/")[0] if row.namespaced else ""
        if held is None or (row.namespaced and namespace not in namespaces):
            self._held.pop(key, None)  # gone, unmanaged or not opted in
            self._reads.pop(key, None)
            self._drop(key)
            return None
        started = time.monotonic()
        obj = _unpacked(held)
        obj.setdefault("apiVersion", row.api_version)
        obj.setdefault("kind", row.kind)
        try:
            done, stands, action = await self._one(target, obj, namespaces, key)
        except NotLeader:
            return None
        except Exception as exc:
            metrics.REEVALUATIONS.labels(row.kind, "error").inc()
            if not refused(exc, "update", f"{row.resource}.{row.group}"):
                log.warning(
                    "reevaluate_failed",
                    kind=row.kind,
                    name=_name(obj),
                    error=error_name(exc),
                )
            done, stands, action = 0, obj, None
        finally:
            metrics.REEVALUATION_SECONDS.observe(time.monotonic() - started)
        self.written += done
        self._stand(key, target, stands, rewritten=done > 0)
        return self._next(action)

    def _stand(self, key: Key, target: Target, obj: Obj, *, rewritten: bool) -> None:
        """How ``obj`` stands now: its kind's gauge and the keepers of its kind."""
        kind = target.row.kind
        tally = target.following.tally
        counted = self.counted.setdefault(kind, set())
        if tally is not None and tally.counts(obj):
            counted.add(key)
        else:
            counted.discard(key)
        for keeper in self.keepers:
            if kind in keeper.kinds and keeper.stand(key, obj, rewritten=rewritten):
                keeper.changes = True

    def _drop(self, key: Key) -> None:
        for counted in self.counted.values():
            counted.discard(key)
        for keeper in self.keepers:
            if key[0] in keeper.kinds and keeper.drop(key):
                keeper.changes = True

    def _next(self, action: follow.Action | None) -> float:
        """Seconds until the hold ``action`` waits on ends, at most the safety net."""
        if action is None or action.holds_until is None:
            return self.interval
        wait = (action.holds_until - self.context().now).total_seconds()
        return max(1.0, min(self.interval, wait))

    def _opted_in(self) -> Mapping[str, Mapping[str, str]]:
        """Opted-in namespaces and their labels (carbonshift's own namespace excluded)."""
        if self.namespaces is None:
            return EMPTY
        view = self.namespaces.items()  # replaced as a whole on each change
        if self._opted is None or self._opted[0] is not view:
            own = self.config.service.namespace
            self._opted = (view, {n: labels for n, labels in view.items() if n != own})
        return self._opted[1]

    async def sync(self) -> int:
        """Decide every object once, as a term's first sync does, then run the keepers;
        the number written. Caches that do not follow the API server are filled from one
        list first (a one-off pass: tests, benchmarks, the CLI)."""
        for cache in self.caches:
            if not cache.following:
                try:
                    await cache.list_once(self.api)
                except ApiException as exc:  # that kind waits
                    log.warning("reevaluate_list_failed", resource=str(cache),
                                error=error_name(exc))  # fmt: skip
        before = self.written
        await self.reconcile_all()
        self._tallies()
        for keeper in self.keepers:
            if self.gate.leading:
                await keeper.run()
        return self.written - before

    def _decide(
        self,
        target: Target,
        obj: Mapping[str, Any],
        namespaces: Mapping[str, Mapping[str, str]],
        key: Key,
    ) -> tuple[follow.Action, bool]:
        """The step's action for ``obj``, and False when it is the verdict held from the
        last time (nothing it depends on changed)."""
        meta = meta_of(obj)
        labels = namespaces.get(meta.namespace, {})
        ctx = self.context()
        uid, version = meta.uid, meta.resource_version
        if not uid or not version or ctx.generation is None:
            return self.rules.decide(target, obj, ctx, labels), True
        # What the decision reads besides the clock: the object as stored, the fleet,
        # Liqo's peers, the labels, and the readings and forecasts of the zones it read.
        peers = id(ctx.peers) if ctx.peers is not None else 0
        inputs = (version, ctx.fleet_generation, peers, labels)  # labels: one per namespace
        held = self._held.get(key)
        zones = self._reads.get(key, ())
        if held is not None and held[0] == inputs and held[1] == self._state(zones, ctx):
            action = held[2]
            if action.holds_until is None or ctx.now < action.holds_until:
                return action, False
        read: set[str] = set()
        action = self.rules.decide(target, obj, ctx, labels, read)
        zones = self._zonesets.setdefault(frozenset(read), tuple(sorted(read)))
        self._reads[key] = zones
        if action.outcome == "kept":
            self._held[key] = (inputs, self._state(zones, ctx), action)
        else:
            self._held.pop(key, None)
        return action, True

    def _state(self, zones: tuple[str, ...], ctx: Context) -> tuple[object, ...]:
        """:func:`_zone_state`, one tuple per set of zones and per table: the objects that
        read the same zones hold the same one."""
        memo = self._states
        if memo is None or memo[0] is not ctx.table or memo[1] is not ctx.ranked:
            memo = self._states = (ctx.table, ctx.ranked, {})
        found = memo[2].get(zones)
        if found is None:
            found = memo[2][zones] = _zone_state(zones, ctx)
        return found

    async def _one(
        self, target: Target, obj: Obj, namespaces: Mapping[str, Mapping[str, str]], key: Key
    ) -> tuple[int, Obj, follow.Action | None]:
        """Re-evaluate one object; 1 when it was written, the object as it stands and the
        action decided."""
        row = target.row
        for attempt in range(2):
            action, fresh = self._decide(target, obj, namespaces, key)
            if action.outcome == "skipped":
                return 0, obj, action
            if not action.changes:
                metrics.REEVALUATIONS.labels(row.kind, action.outcome).inc()
                if fresh:  # a held verdict: this resourceVersion was looked at already
                    await self._announce_missed(row, obj)
                return 0, obj, action
            for keeper in self.keepers:  # no write while a keeper plans on a pass
                await keeper.quiet.wait()
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
                    return 0, obj, None
                obj = await self._read(row, obj)  # someone wrote first: decide again on it
                continue
            metrics.WRITES.labels(row.kind).inc()
            said = self._switched(row, stored) if action.outcome == "switched" else None
            metrics.REEVALUATIONS.labels(row.kind, said.outcome if said else action.outcome).inc()
            await self._tell(row, stored, action)
            return 1, stored, action
        return 0, obj, None  # pragma: no cover - the loop always returns

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

    def _switched(self, row: Kind, stored: Obj) -> Switched | None:
        """How a keeper of the kind has a switch of ``stored`` said (None: as a switch)."""
        for keeper in self.keepers:
            if row.kind in keeper.kinds and (said := keeper.switched(stored)) is not None:
                return said
        return None

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
            elif (said := self._switched(row, obj)) is not None:
                reason, verb = said.reason, said.verb
                note = f"{said.note} (switched at {entry['t']})"
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
        elif action.outcome == "switched" and (said := self._switched(row, stored)):
            reason, verb, note = said.reason, said.verb, said.note
            log.info(said.log, kind=row.kind, name=name, reason=action.reason)
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

    def describe(self) -> dict[str, Any]:
        return {
            "min_interval_seconds": self.config.reevaluate.min_interval_seconds,
            "forecast": self.config.reevaluate.forecast,
            "kinds": [t.row.kind for t in self.targets],
        }


def _name(obj: Mapping[str, Any]) -> str:
    return meta_of(obj).namespaced_name


def _counts(target: Target, obj: Obj) -> int:
    """1 when the kind's gauge counts ``obj``."""
    tally = target.following.tally
    return int(tally is not None and tally.counts(obj))


REBALANCED = ("CarbonRebalanced", "Rebalance")
DROPPED = "CarbonFieldDropped"
"""The API server stored a field carbonshift wrote without a part of it: decided again."""


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
