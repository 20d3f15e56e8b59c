"""The leader moves replicas back to greener tiers of an ordered fill (issue 20).

Karmada fills an ordered fill's tiers greenest first, but never moves replicas back when
room returns on a greener cluster (Steady mode). After each re-evaluation pass the leader
looks at every managed policy whose placement is an ordered fill
(:func:`~webhook.decision.karmada.terms.fill_tiers`): for each of its ResourceBindings
(``work.karmada.io/v1alpha2``, ClusterResourceBindings too) it reads where the replicas
run (``spec.clusters``), the room each cluster has for one more of them (Karmada's
general estimator, :func:`~webhook.decision.karmada.capacity.room`, on the Cluster's
``status.resourceSummary`` and the binding's ``replicaRequirements``) and the intensities
the re-evaluation ranks on, and asks :func:`~webhook.decision.karmada.capacity.assess_move` whether
a Fresh reschedule is worth it within the move budgets (per policy and for the fleet,
sliding one-hour windows kept in memory). A planned move becomes a ``WorkloadRebalancer``
(``apps.karmada.io/v1alpha1``) for the binding's workload and a ``Normal`` Event
``CarbonReplicasMoved`` on the policy (what moves, intensity before -> after, expected
saving). A fill written as failover groups (Karmada before v1.18) cannot be moved back that
way: Karmada schedules a binding from the term it last observed
(``status.schedulerObservedAffinityName``), never an earlier one, a Fresh reschedule
included. Its move back renames the policy's groups instead (an update guarded by the
``resourceVersion`` read, :func:`~webhook.decision.karmada.terms.regrouped`): the observed
term gone, Karmada schedules the binding again from the greenest term in Steady mode, the
replicas on greener tiers staying where they are
(:func:`~webhook.decision.karmada.capacity.regroup`).

Many bindings in one pass must not all chase the same green cluster: what a planned move
sends to a cluster is counted as allocating there for the rest of the pass and until the
move has landed (:data:`CLAIM_GRACE_SECONDS` after the binding is scheduled again). A
binding whose previous WorkloadRebalancer of ours has not finished, or whose reschedule
is still pending (Karmada's scheduler has not observed the binding's latest spec), or whose
policy this pass rewrote (Karmada schedules it on the new placement by itself), waits
(``in_flight``). Metrics: ``carbonshift_rebalances_total{outcome}``
and ``carbonshift_replicas_moved_total``.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import functools
import sys
import time
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Literal, TypedDict

import msgspec
import orjson
import structlog
from kubernetes_asyncio import client
from kubernetes_asyncio.client.rest import ApiException

from webhook.controllers.keeper import Keeper, Switched
from webhook.decision.karmada import carry
from webhook.decision.karmada.bindings import (
    BINDINGS,
    CLUSTERS,
    CPP_NAME,
    POLICY_GROUP,
    POLICY_PLURALS,
    POLICY_VERSION,
    PP_NAME,
    PP_NAMESPACE,
    PolicyKey,
    Workload,
    mean_intensity,
    owner,
    pending,
    placed,
    policy_key,
    requests,
    resource_summaries,
    with_allocating,
    workload,
)
from webhook.decision.karmada.capacity import Move, assess_move, neutral_intensity, room
from webhook.decision.karmada.terms import regrouped
from webhook.decision.karmada.view import fill_of
from webhook.decision.quantity import quantity
from webhook.decision.record import Record, fingerprint
from webhook.kinds import Context
from webhook.kube.cache import CacheSet, Head, WatchedCache
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
from webhook.model.objects import dig, items, kept, meta_of
from webhook.model.resources import Resource
from webhook.model.vocabulary import DECISION
from webhook.runtime import metrics

if TYPE_CHECKING:
    from webhook.controllers.follower import Follower

log = structlog.get_logger("carbonshift.rebalance")

Obj = dict[str, Any]
Counter = collections.Counter[str]
Outcome = Literal["moved", "not_worth_it", "over_budget", "no_room", "in_flight", "lazy", "error"]

REBALANCERS = Resource("apps.karmada.io", "v1alpha1", "workloadrebalancers", "WorkloadRebalancer")
REBALANCER_RESOURCE = REBALANCERS.name
MANAGED_BY = ("app.kubernetes.io/managed-by", "carbonshift")
TTL_SECONDS = 600
"""``ttlSecondsAfterFinished`` of our WorkloadRebalancers."""
WINDOW_SECONDS = 3600.0
"""The move budgets count the replicas moved in the last hour."""
CLAIM_GRACE_SECONDS = 30.0
"""How long what a move sends to a cluster still counts as allocating there once the
binding is scheduled again: the member's Pods and the Cluster's resource summary follow
within seconds (karmada-controller-manager reports every 10 s)."""


class Window:
    """Replicas moved in the last :data:`WINDOW_SECONDS`, per key (one key: the fleet)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._moves: dict[object, collections.deque[tuple[float, int]]] = {}
        self._totals: dict[object, int] = {}
        """Key -> the replicas its deque holds (kept as moves come and lapse)."""

    def used(self, key: object) -> int:
        moves = self._moves.get(key)
        if not moves:
            return 0
        start = self.clock() - WINDOW_SECONDS
        while moves and moves[0][0] <= start:
            self._totals[key] -= moves.popleft()[1]
        return self._totals[key]

    def add(self, key: object, replicas: int) -> None:
        self._moves.setdefault(key, collections.deque()).append((self.clock(), replicas))
        self._totals[key] = self._totals.get(key, 0) + replicas


@dataclasses.dataclass(slots=True)
class _Claim:
    """Resources a move sends to clusters, counted until it has landed."""

    amounts: dict[str, dict[str, Decimal]]
    """cluster -> resource -> amount (``pods`` included)."""
    until: float | None = None
    """None while the move is in flight; then when the claim lapses."""


SMALL = 16
"""Up to this many names, a fill's clusters are held as a tuple (:meth:`Tiers.hold`)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Named:
    """Many cluster names, held as one bit each of a numbering shared by every fill
    (:class:`Tiers`): an open policy's tiers name every cluster, and a thousand names
    held as a frozenset per policy took 33 KB each; as bits, 130 bytes."""

    bits: int
    numbers: Mapping[str, int] = dataclasses.field(compare=False, repr=False)
    """Cluster name -> its bit (only ever grows, so a held mask never changes meaning)."""

    def __contains__(self, name: object) -> bool:
        number = self.numbers.get(name) if isinstance(name, str) else None
        return number is not None and bool(self.bits >> number & 1)


class Tiers:
    """Ordered fills' tiers held once however many policies have them, with the clusters
    they name: cluster names are one string each, and equal tiers (every open policy's
    when they were decided on the same room) one tuple."""

    def __init__(self) -> None:
        self._held: dict[tuple[tuple[str, ...], ...], Collection[str] | Named] = {}
        self._tiers: dict[tuple[tuple[str, ...], ...], tuple[tuple[str, ...], ...]] = {}
        self._numbers: dict[str, int] = {}

    def hold(
        self, tiers: Sequence[Sequence[str]]
    ) -> tuple[tuple[tuple[str, ...], ...], Collection[str] | Named]:
        """``tiers`` as held, and every cluster they name (a tuple up to
        :data:`SMALL` names, which a lookup scans as fast as a set's and holds in a tenth of
        its memory; bits of the shared numbering beyond: :class:`Named`)."""
        key = tuple(tuple(sys.intern(n) for n in tier) for tier in tiers)
        held = self._tiers.setdefault(key, key)
        named = self._held.get(held)
        if named is None:
            names = tuple(dict.fromkeys(n for tier in held for n in tier))
            named = self._held[held] = names if len(names) <= SMALL else self._bits(names)
        return held, named

    def _bits(self, names: Sequence[str]) -> Named:
        numbers = self._numbers
        for name in names:
            numbers.setdefault(name, len(numbers))
        mask = bytearray((len(numbers) + 7) // 8)
        for name in names:
            number = numbers[name]
            mask[number >> 3] |= 1 << (number & 7)
        return Named(int.from_bytes(mask, "little"), numbers)

    def keep(self, live: Iterable[Fill]) -> None:
        """Forget tiers no live fill holds (called when more are held than live)."""
        kept = {fill.tiers for fill in live}
        self._tiers = {k: v for k, v in self._tiers.items() if v in kept}
        self._held = {k: v for k, v in self._held.items() if k in kept}

    def __len__(self) -> int:
        return len(self._tiers)


@dataclasses.dataclass(frozen=True, slots=True)
class Fill:
    """What the rebalancer keeps of a managed ordered-fill policy: who it is, its tiers
    and whether Karmada applies its changes lazily. Small, so a pass holds one per policy
    and never the policies themselves (whose decision records name every cluster)."""

    key: PolicyKey
    ref: Mapping[str, Any]
    """apiVersion, kind and metadata (name, namespace, uid, resourceVersion): what an
    Event about the policy names."""
    tiers: tuple[tuple[str, ...], ...]
    lazy: bool
    named: Collection[str] | Named
    """Every cluster the tiers name."""
    groups: bool = False
    """Written as failover groups (Karmada before v1.18), not overflow tiers."""

    @classmethod
    def of(cls, policy: Mapping[str, Any], shared: Tiers | None = None) -> Fill | None:
        """The policy's fill when carbonshift decided it as an ordered fill, else None.
        ``shared``: tiers already held (:class:`Tiers`), so that policies with the same
        tiers (every open policy names every cluster) hold them once."""
        managed = _managed(policy)
        if managed is None:
            return None
        tiers, groups = managed
        meta = meta_of(policy)
        ref = {
            "apiVersion": policy.get("apiVersion"),
            "kind": policy.get("kind"),
            "metadata": {
                "name": meta.name,
                "namespace": meta.namespace,
                "uid": meta.uid,
                "resourceVersion": meta.resource_version,
            },
        }
        held, named = (shared if shared is not None else Tiers()).hold(tiers)
        return cls(policy_key(policy), ref, held, carry.lazy(policy), named, groups)

    def reach(self, current: Mapping[str, int]) -> list[list[str]]:
        """The tiers a Fresh reschedule of ``current`` can use, then the clusters holding
        replicas that no tier names. When every replica runs in a tier, only the tiers up
        to the last one holding replicas: those hold them all, so a fill never reaches
        further (an open policy's tiers name every cluster; its replicas sit in a few).
        Failover groups reach every tier: Karmada divides a term's whole group."""
        outside = [c for c in current if c not in self.named]
        if outside or self.groups:
            return [*map(list, self.tiers), outside]
        last = max(k for k, tier in enumerate(self.tiers) if any(n in current for n in tier))
        return [*map(list, self.tiers[: last + 1]), []]


@dataclasses.dataclass(slots=True)
class _View:
    """What one pass reads: clusters' resource summaries, intensities, busy workloads."""

    summaries: Mapping[str, object]
    intensities: Mapping[str, float | None]
    busy: set[Workload]
    claimed: dict[str, dict[str, Decimal]] | None = None
    """What moves asked for and has not landed, summed once per pass (and per new move)."""
    rooms: dict[tuple[str, tuple[tuple[str, str], ...]], int] = dataclasses.field(
        default_factory=dict
    )
    """(cluster, per-replica requests) -> replicas it has room for, while :attr:`claimed`
    stands (bindings mostly share a few request shapes)."""
    order: dict[str, int] = dataclasses.field(default_factory=dict)
    """Cluster -> its place in the Clusters' list (plans read rooms in that order)."""
    fleet: int | None = None
    """:meth:`Rebalancer._fleet_state` of this pass."""
    rewritten: Collection[PolicyKey] = ()
    """The policies the pass wrote (their bindings wait for Karmada)."""
    planned: Mapping[str, tuple[tuple[object, ...], Outcome | None]] = dataclasses.field(
        default_factory=dict
    )
    """The last pass's plans that moved nothing (:attr:`Rebalancer._planned`)."""
    neutral: float = 0.0
    """What a cluster without intensity counts as in a move's cost."""
    renamed: set[PolicyKey] = dataclasses.field(default_factory=set)
    """The failover-groups policies whose groups this pass renamed (their bindings wait)."""


def _rooms(
    view: _View,
    claimed: Mapping[str, Mapping[str, Decimal]],
    names: list[str],
    need: Mapping[str, Any],
) -> dict[str, int]:
    """Replicas of ``need`` each of ``names`` has room for, the ``claimed`` amounts
    (:attr:`_View.claimed`) counted."""
    shape = tuple(sorted((str(k), str(v)) for k, v in need.items()))
    out = {}
    for name in names:
        slot = (name, shape)
        got = view.rooms.get(slot)
        if got is None:
            summary = with_allocating(view.summaries[name], claimed.get(name, {}))
            got = view.rooms[slot] = room(summary, need) or 0
        out[name] = got
    return out


def _slim(obj: Mapping[str, Any], _before: Obj | None) -> Obj:
    """What a watched cache holds of a Cluster or a WorkloadRebalancer."""
    return slim(obj)


OWNED_BY = (PP_NAME, PP_NAMESPACE, CPP_NAME)
"""The annotations of a binding that name its policy (all :func:`owner` reads of them)."""
RESOURCE = ("apiVersion", "kind", "namespace", "name")


def _slim_binding(obj: Mapping[str, Any], _before: Obj | None) -> Obj:
    """What a watched cache holds of a binding: :func:`slim`, its annotations cut to those
    naming its policy, its labels dropped, its resource cut to what names it (a leader
    holds every binding of the fleet)."""
    out = slim(obj)
    meta = out.get("metadata")
    if isinstance(meta, dict):
        annotations = meta.get("annotations")
        if isinstance(annotations, Mapping):
            meta["annotations"] = {k: annotations[k] for k in OWNED_BY if k in annotations}
        meta.pop("labels", None)
    spec = out.get("spec")
    if isinstance(spec, dict) and isinstance(resource := spec.get("resource"), Mapping):
        spec["resource"] = {k: resource[k] for k in RESOURCE if k in resource}
    return out


def _listed_schema() -> Any:
    """What :func:`_slim_binding` keeps of a binding, as a schema (typed dicts built from
    :data:`_KEEP`): a listed binding's JSON is decoded into just that, the rest skipped
    unparsed."""
    typed: Any = TypedDict  # built from the fields at run time
    parts: dict[str, dict[str, Any]] = {p: dict.fromkeys(keys, Any) for p, keys in _KEEP.items()}
    parts["metadata"].pop("labels", None)
    parts["metadata"]["annotations"] = typed("Owned", dict.fromkeys(OWNED_BY, str), total=False)
    parts["spec"]["resource"] = typed("Named", dict.fromkeys(RESOURCE, str), total=False)
    fields: dict[str, Any] = {"apiVersion": str, "kind": str}
    fields |= {p: typed(p.title(), keys, total=False) for p, keys in parts.items()}
    return typed("Binding", fields, total=False)


@functools.cache
def _listed_binding() -> msgspec.json.Decoder[Any]:
    return msgspec.json.Decoder(_listed_schema())


def _slim_listed_binding(data: memoryview, _head: Head, before: Obj | None) -> Obj:
    """:func:`_slim_binding` of a listed binding, decoded from its JSON with only what is
    kept parsed (one the schema does not read, such as a field of another type than the
    API's, goes through :func:`_slim_binding`)."""
    try:
        out: Obj = _listed_binding().decode(data)
    except msgspec.ValidationError:
        return _slim_binding(orjson.loads(data), before)
    return out


class Watched(CacheSet):
    """The Karmada objects the leader's Karmada controllers read from memory instead of
    listing: the Clusters, the bindings of both kinds (one cache each, shared by the
    rebalancer and the carrier) and carbonshift's WorkloadRebalancers, each held slim
    (:func:`slim`)."""

    def __init__(self) -> None:
        super().__init__()
        self.clusters: WatchedCache[Obj] = self.watched(CLUSTERS, _slim, kind="cluster")
        self.bindings: tuple[WatchedCache[Obj], ...] = tuple(
            self.watched(kind, _slim_binding, kind=kind.kind.lower(), raw=_slim_listed_binding)
            for kind in BINDINGS
        )
        self.rebalancers: WatchedCache[Obj] = self.watched(
            REBALANCERS, _slim, kind="workloadrebalancer", label_selector="=".join(MANAGED_BY)
        )
        self.caches = (self.clusters, *self.bindings, self.rebalancers)

    @classmethod
    def of(cls, on_keys: Callable[[Collection[str]], None] | None = None) -> Watched:
        """The caches; ``on_keys`` is told of every change of a Cluster or a binding."""
        watched = cls()
        if on_keys is not None:
            watched.follow(on_keys, clusters=True)
        return watched

    def follow(self, on_keys: Callable[[Collection[str]], None], *, clusters: bool) -> None:
        """Tell ``on_keys`` of every change of a binding (and of a Cluster with
        ``clusters``)."""
        told = {*BINDINGS, *((CLUSTERS,) if clusters else ())}

        def changed(resource: Resource, keys: Collection[str]) -> None:
            if resource in told:
                on_keys(keys)

        self.listen(changed)


class Rebalancer:
    """Plans and asks for moves back to greener tiers; writes only while leading."""

    def __init__(
        self,
        api: client.ApiClient,
        config: Config,
        gate: Gate,
        *,
        events: EventRecorder | None = None,
        clock: Callable[[], float] = time.monotonic,
        watched: Watched | None = None,
    ) -> None:
        """``watched``: the caches a pass reads (a pass waits until they synced); without
        them each pass lists the Clusters, bindings and WorkloadRebalancers."""
        self.objects = client.CustomObjectsApi(api)
        self.watched = watched
        self._asked: dict[str, tuple[Workload, float]] = {}
        """WorkloadRebalancers this replica created that its cache has not shown yet:
        name -> (the workload, when)."""
        self.gate = gate
        self.events = events
        self.settings = config.rebalance
        self.rule = config.rebalance
        self.clock = clock
        self.window = Window(clock)
        self._claims: dict[Workload, _Claim] = {}
        self._fills: dict[str, tuple[str, Fill | None]] = {}
        """Policy uid -> (resourceVersion, its fill) as last read."""
        self._seen: set[str] = set()
        self._planned: dict[str, tuple[tuple[object, ...], Outcome | None]] = {}
        """Binding uid -> what its plan read and the verdict (no move) it came to: planned
        again only when one of them changed (:meth:`_one`)."""
        self._fleet: tuple[tuple[object, ...], int] | None = None
        """The Clusters' resourceVersions and the intensities of the last pass, and the
        number that stands for them in :attr:`_planned`."""
        self._claims_changed = 0
        """Bumped whenever what moves claim changes (a new move, a claim landed or lapsed)."""
        self._awaiting: dict[str, tuple[str, float]] = {}
        """Binding uid -> its resourceVersion when its policy was rewritten, and until when
        it waits: Karmada has not taken the new placement into the binding while it is
        unchanged (at most :data:`CLAIM_GRACE_SECONDS`)."""

    # --- one pass -------------------------------------------------------------------------

    async def rebalance(
        self,
        policies: Iterable[Mapping[str, Any] | Fill],
        ctx: Context,
        rewritten: Collection[PolicyKey] = (),
    ) -> Counter:
        """Plan and ask for the moves of every managed ordered-fill policy in ``policies``
        (as the re-evaluation left them, or their :class:`Fill`), ranked on ``ctx``'s
        table; the outcomes. The bindings of the policies in ``rewritten`` (written by
        this pass) wait: Karmada schedules them on the new placement by itself, and a
        move planned on the placement they still show would race it."""
        outcomes: Counter = collections.Counter()
        fills = (p if isinstance(p, Fill) else self.fill(p) for p in policies)
        managed = {f.key: f for f in fills if f is not None}
        self._fills = {uid: held for uid, held in self._fills.items() if uid in self._seen}
        self._seen = set()
        if not managed:
            return outcomes
        listed = await self._list_all()
        if listed is None:
            return outcomes
        clusters, bindings, rebalancers = listed
        busy = {w for r in rebalancers if not _finished(r) for w in _targets(r)}
        self._settle(bindings, busy)
        summaries = resource_summaries(clusters)
        view = _View(summaries, _intensities(ctx, summaries), busy)
        view.order = {name: i for i, name in enumerate(summaries)}
        view.neutral = neutral_intensity(view.intensities)
        view.fleet = self._fleet_state(clusters, view.intensities)
        view.rewritten = rewritten
        now = self.clock()
        self._awaiting = {k: v for k, v in self._awaiting.items() if now < v[1]}
        planned, self._planned = self._planned, {}
        view.planned = planned
        for binding in bindings:
            key = owner(binding)
            if key is None or key not in managed:
                continue
            if not self.gate.leading:
                raise NotLeader("not leading")
            try:
                outcome = await self._one(managed[key], binding, view)
            except (NotLeader, ApiException) as exc:
                if isinstance(exc, NotLeader):
                    raise
                outcome = "error"
                if not refused(exc, "create", REBALANCER_RESOURCE):
                    log.warning(
                        "rebalance_failed",
                        binding=meta_of(binding).namespaced_name,
                        error=error_name(exc),
                    )
            if outcome is not None:
                outcomes[outcome] += 1
                metrics.REBALANCES.labels(outcome).inc()
        return outcomes

    def _fleet_state(
        self, clusters: Sequence[Mapping[str, Any]], intensities: Mapping[str, float | None]
    ) -> int | None:
        """A number that changes whenever a Cluster (its resourceVersion) or an intensity
        does; None when a Cluster has no resourceVersion (nothing is then held)."""
        versions = tuple(meta_of(c).resource_version for c in clusters)
        if not all(versions):
            return None
        state = (versions, tuple(intensities.items()))
        if self._fleet is None or self._fleet[0] != state:
            self._fleet = (state, (self._fleet[1] + 1) if self._fleet is not None else 0)
        return self._fleet[1]

    def fill(self, policy: Mapping[str, Any]) -> Fill | None:
        """:meth:`Fill.of`, read again only when the policy changed (its resourceVersion)."""
        meta = meta_of(policy)
        uid, version = meta.uid, meta.resource_version
        if not uid or not version:
            return Fill.of(policy)
        self._seen.add(uid)
        held = self._fills.get(uid)
        if held is None or held[0] != version:
            held = self._fills[uid] = (version, Fill.of(policy))
        return held[1]

    def _awaits(self, fill: Fill, binding: Mapping[str, Any], view: _View) -> bool:
        """Whether ``binding``'s policy was rewritten and Karmada has not taken the new
        placement into the binding yet: it waits from the rewrite until the binding
        changes (then :func:`pending` says whether Karmada's scheduler has placed it), at
        most :data:`CLAIM_GRACE_SECONDS`. A move planned on the placement it still shows
        would race Karmada's own reschedule."""
        meta = meta_of(binding)
        uid, version = meta.uid, meta.resource_version
        now = self.clock()
        if fill.key in view.rewritten:
            if uid and version:
                self._awaiting[uid] = (version, now + CLAIM_GRACE_SECONDS)
            return True
        awaited = self._awaiting.get(uid) if uid else None
        if awaited is None:
            return False
        if awaited[0] == version and now < awaited[1]:
            return True
        del self._awaiting[uid]
        return False

    async def _one(self, fill: Fill, binding: Mapping[str, Any], view: _View) -> Outcome | None:
        """Plan one binding; ask for its move when there is one. None: nothing to move."""
        target_workload = workload(binding)
        current = placed(binding)
        if target_workload is None or not current:
            return None
        if fill.lazy:
            return "lazy"  # Karmada reschedules on the placement it last applied
        if target_workload in view.busy or pending(binding) or self._awaits(fill, binding, view):
            return "in_flight"
        if fill.key in view.renamed:
            return "in_flight"
        key = fill.key
        budget = min(
            self.settings.max_moves_per_policy - self.window.used(key),
            self.settings.max_moves_per_hour - self.window.used(None),
        )
        # The same binding, policy, Clusters, intensities, claims and budget: the same plan.
        meta = meta_of(binding)
        uid, version = meta.uid, meta.resource_version
        inputs = (version, fill, view.fleet, self._claims_changed, budget)
        held = view.planned.get(uid) if uid and version and view.fleet is not None else None
        if held is not None and held[0] == inputs:
            self._planned[uid] = held
            return held[1]
        tiers = fill.reach(current)
        need = requests(binding)
        claimed = view.claimed
        if claimed is None:
            claimed = view.claimed = self._claimed()
            view.rooms.clear()
        # Only the clusters the binding's tiers name matter to the plan.
        names = {n for tier in tiers for n in tier if n in view.order}
        room_now = _rooms(view, claimed, sorted(names, key=view.order.__getitem__), need)
        move, verdict = assess_move(
            current, tiers, room_now, view.intensities, self.rule, budget=budget,
            neutral=view.neutral, groups=fill.groups,
        )  # fmt: skip
        if move is None:
            if uid and version and view.fleet is not None:
                self._planned[uid] = (inputs, verdict)
            return verdict
        if fill.groups:
            if not await self._regroup(fill):
                return "in_flight"  # the policy changed since it was listed: the next pass
            view.renamed.add(fill.key)
        await self._ask(fill, binding, move, view.intensities)
        self.window.add(key, move.moved)
        self.window.add(None, move.moved)
        self._claims[target_workload] = _Claim(_arriving(current, move, need))
        self._claims_changed += 1
        view.claimed = None  # the new claim counts for the rest of the pass
        view.busy.add(target_workload)
        metrics.REPLICAS_MOVED.inc(move.moved)
        return "moved"

    async def _ask(
        self,
        fill: Fill,
        binding: Mapping[str, Any],
        move: Move,
        intensities: Mapping[str, float | None],
    ) -> None:
        """Create the WorkloadRebalancer for the binding's workload (failover groups: their
        renaming was the move) and record the Event."""
        target = workload(binding)
        assert target is not None  # checked by the caller
        api_version, kind, namespace, name = target
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        meta = meta_of(binding)
        rebalancer = f"carbonshift-{fingerprint([meta.uid, meta.namespaced_name, now])}"
        if fill.groups:
            await self._tell(fill, binding, move, intensities, key=rebalancer, rebalancer=None)
            return
        body = {
            "apiVersion": REBALANCERS.api_version,
            "kind": REBALANCERS.kind,
            "metadata": {"name": rebalancer, "labels": dict([MANAGED_BY])},
            "spec": {
                "workloads": [{"apiVersion": api_version, "kind": kind, "name": name,
                               **({"namespace": namespace} if namespace else {})}],
                "ttlSecondsAfterFinished": TTL_SECONDS,
            },
        }  # fmt: skip
        if not self.gate.leading:
            raise NotLeader("not leading")
        await self.objects.create_cluster_custom_object(
            REBALANCERS.group,
            REBALANCERS.version,
            REBALANCERS.plural,
            body,
            field_manager=FIELD_MANAGER,
            _request_timeout=REQUEST_TIMEOUT,
        )
        if self.watched is not None:
            self._asked[rebalancer] = (target, self.clock())
        await self._tell(fill, binding, move, intensities, key=rebalancer, rebalancer=rebalancer)

    async def _tell(
        self,
        fill: Fill,
        binding: Mapping[str, Any],
        move: Move,
        intensities: Mapping[str, float | None],
        *,
        key: str,
        rebalancer: str | None,
    ) -> None:
        """Log line and Event of a move (``rebalancer``: the WorkloadRebalancer asked for;
        None: the failover groups were renamed)."""
        current = placed(binding)
        _, kind, _, name = workload(binding) or ("", "", "", "")
        how = (
            f"WorkloadRebalancer {rebalancer}"
            if rebalancer is not None
            else "failover groups renamed: Karmada schedules it again from the greenest"
        )
        before = mean_intensity(current, intensities)
        after = mean_intensity(move.target, intensities)
        what = move.describe(current)
        log.info(
            "replicas_moved",
            policy="/".join(filter(None, fill.key[1:])),
            binding=meta_of(binding).namespaced_name,
            moves=what,
            before=round(before, 1),
            after=round(after, 1),
            saving_grams=round(move.saving_grams, 1),
            rebalancer=rebalancer or "renamed groups",
        )
        if self.events is not None:
            note = (
                f"moving {move.moved} replicas of {kind} {name} back to greener clusters "
                f"({what}): expected intensity {before:.0f} -> {after:.0f} gCO2eq/kWh, "
                f"expected saving {move.saving_grams:.0f} g over {self.rule.horizon_hours:g} h "
                f"({how})"
            )
            await self.events.emit(
                fill.ref, reason="CarbonReplicasMoved", note=note, action="Move",
                key=key.removeprefix("carbonshift-"),
            )  # fmt: skip

    async def _regroup(self, fill: Fill) -> bool:
        """Rename a failover-groups policy's terms (:func:`regrouped`), an update guarded by
        the ``resourceVersion`` read; False when the policy no longer stands as listed (gone,
        written by someone, no longer carbonshift's groups)."""
        kind, namespace, name = fill.key
        plural = POLICY_PLURALS.get(kind)
        if plural is None:
            return False
        group, version = POLICY_GROUP, POLICY_VERSION
        try:
            if namespace:
                policy = await self.objects.get_namespaced_custom_object(
                    group, version, namespace, plural, name, _request_timeout=REQUEST_TIMEOUT
                )
            else:
                policy = await self.objects.get_cluster_custom_object(
                    group, version, plural, name, _request_timeout=REQUEST_TIMEOUT
                )
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        meta = meta_of(policy)
        expected = fill.ref.get("metadata", {}).get("resourceVersion")
        if expected and meta.resource_version != expected:
            return False  # written since the pass listed it: planned on a stale placement
        placement = dig(policy, "spec", "placement")
        record = Record.decode(meta.annotations.get(DECISION))
        renamed = regrouped(placement if isinstance(placement, Mapping) else {}, record)
        if renamed is None:
            return False
        terms, new = renamed
        policy["spec"]["placement"]["clusterAffinities"] = terms
        policy["metadata"]["annotations"][DECISION] = new.encode()
        if not self.gate.leading:
            raise NotLeader("not leading")
        options: dict[str, Any] = {
            "field_manager": FIELD_MANAGER,
            "_request_timeout": REQUEST_TIMEOUT,
        }
        try:
            if namespace:
                await self.objects.replace_namespaced_custom_object(
                    group, version, namespace, plural, name, policy, **options
                )
            else:
                await self.objects.replace_cluster_custom_object(
                    group, version, plural, name, policy, **options
                )
        except ApiException as exc:
            if exc.status in (404, 409):
                metrics.KUBE_CONFLICTS.labels(f"{plural}.{group}").inc()
                return False
            raise
        return True

    # --- what is in flight ----------------------------------------------------------------

    def _settle(self, bindings: Sequence[Mapping[str, Any]], busy: set[Workload]) -> None:
        """Start the grace of claims whose move has landed; drop the lapsed ones."""
        now = self.clock()
        waiting = {w for b in bindings if pending(b) and (w := workload(b))} | busy
        for key, claim in list(self._claims.items()):
            if key in waiting:
                claim.until = None
            elif claim.until is None:
                claim.until = now + CLAIM_GRACE_SECONDS
            elif claim.until <= now:
                del self._claims[key]
                self._claims_changed += 1  # the room it held is free again

    def _claimed(self) -> dict[str, dict[str, Decimal]]:
        """cluster -> resource -> amount that moves asked for and that has not landed."""
        out: dict[str, dict[str, Decimal]] = {}
        for claim in self._claims.values():
            for cluster, amounts in claim.amounts.items():
                mine = out.setdefault(cluster, {})
                for resource, amount in amounts.items():
                    mine[resource] = mine.get(resource, Decimal(0)) + amount
        return out

    # --- reading --------------------------------------------------------------------------

    async def _list_all(self) -> tuple[list[Obj], list[Obj], list[Obj]] | None:
        """Clusters, bindings of both kinds, our WorkloadRebalancers (from the watched
        caches, else listed); None when any of them cannot be read now (the next pass
        tries again)."""
        watched = self.watched
        if watched is not None:
            if not watched.synced:
                return None
            asked = watched.rebalancers.items()
            return (
                list(watched.clusters.items().values()),
                [b for cache in watched.bindings for b in cache.items().values()],
                [*asked.values(), *self._unseen(asked)],
            )
        clusters = await self._list(CLUSTERS)
        bindings = [b for kind in BINDINGS for b in items(await self._list(kind))]
        selector = "=".join(MANAGED_BY)
        rebalancers = await self._list(REBALANCERS, label_selector=selector)
        if clusters is None or rebalancers is None:
            return None
        return clusters, bindings, rebalancers

    def _unseen(self, cached: Mapping[str, Obj]) -> list[Obj]:
        """The WorkloadRebalancers this replica asked for that the watch has not delivered
        yet (for :data:`CLAIM_GRACE_SECONDS` at most), as unfinished ones: their workload
        is in flight, never asked to move twice."""
        now = self.clock()
        self._asked = {
            name: (target, at) for name, (target, at) in self._asked.items()
            if name not in cached and now - at < CLAIM_GRACE_SECONDS
        }  # fmt: skip
        return [_asked_for(target) for target, _ in self._asked.values()]

    async def _list(self, kind: Resource, **options: Any) -> list[Obj] | None:
        """Every object of ``kind``, a page (:data:`~webhook.kube.client.LIST_PAGE`) at a
        time, each cut down to the fields the rebalancer reads (:func:`slim`), so a pass
        never holds whole bindings (their placements and per-cluster statuses)."""
        group, version, plural = kind.group, kind.version, kind.plural
        resource = kind.name
        found: list[Obj] = []
        try:
            async for page in pages(self.objects, group, version, plural, **options):
                found.extend(slim(o) for o in page if isinstance(o, Mapping))
        except ApiException as exc:
            metrics.KUBE_ERRORS.labels(resource, error_name(exc)).inc()
            if not (refused(exc, "list", resource) or absent(exc, resource)):
                log.warning("rebalance_list_failed", resource=resource, error=error_name(exc))
            return None
        return found


_KEEP: dict[str, tuple[str, ...]] = {
    "metadata": (
        "name",
        "namespace",
        "annotations",
        "labels",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
    ),
    "spec": (
        "clusters",
        "replicas",
        "replicaRequirements",
        "components",
        "requiredBy",
        "resource",
        "rescheduleTriggeredAt",
        "workloads",
    ),
    "status": (
        "lastScheduledTime",
        "schedulerObservedGeneration",
        "schedulerObservedAffinityName",
        "resourceSummary",
        "finishTime",
        "observedWorkloads",
    ),
}
"""What :func:`slim` keeps of a listed object: everything the rebalancer and the carrier
read of bindings, Clusters and WorkloadRebalancers."""


def slim(obj: Mapping[str, Any]) -> Obj:
    """``obj`` with only the fields in :data:`_KEEP` (and its apiVersion and kind)."""
    return kept(obj, _KEEP)


def _managed(policy: Mapping[str, Any]) -> tuple[list[list[str]], bool] | None:
    """The tiers of a policy carbonshift decided as an ordered fill and whether they are
    failover groups, else None."""
    if DECISION not in meta_of(policy).annotations:
        return None
    placement = dig(policy, "spec", "placement")
    if not isinstance(placement, Mapping):
        return None
    tiers, shape = fill_of(placement)
    if not tiers:
        return None
    return [list(t) for t in tiers], shape == "groups"


def _asked_for(target: Workload) -> Obj:
    """An unfinished WorkloadRebalancer for ``target``, as :func:`_targets` reads one."""
    api_version, kind, namespace, name = target
    named = {"apiVersion": api_version, "kind": kind, "name": name}
    return {"spec": {"workloads": [{**named, **({"namespace": namespace} if namespace else {})}]}}


def _finished(rebalancer: Mapping[str, Any]) -> bool:
    return bool(dig(rebalancer, "status", "finishTime"))


def _targets(rebalancer: Mapping[str, Any]) -> list[Workload]:
    found = [
        workload({"spec": {"resource": i}})
        for i in items(rebalancer, "spec", "workloads")
        if isinstance(i, Mapping)
    ]
    return [w for w in found if w is not None]


def _intensities(ctx: Context, names: Iterable[str]) -> dict[str, float | None]:
    """Cluster -> the intensity its grid zone is ranked on (None: unknown)."""
    out: dict[str, float | None] = {}
    for name in names:
        member = ctx.clusters.get(name)
        zone = member.grid_zone if member is not None else None
        reading = ctx.table.get(zone) if zone else None
        out[name] = reading.value if reading is not None else None
    return out


def _arriving(
    current: Mapping[str, int], move: Move, need: Mapping[str, Any]
) -> dict[str, dict[str, Decimal]]:
    """cluster -> resources the move sends there (``pods`` counts replicas)."""
    out: dict[str, dict[str, Decimal]] = {}
    for cluster, n in move.target.items():
        extra = n - current.get(cluster, 0)
        if extra <= 0:
            continue
        amounts = {"pods": Decimal(extra)}
        for resource, raw in need.items():
            amount = quantity(raw)
            if amount is not None and amount > 0:
                amounts[str(resource)] = amount * extra
        out[cluster] = amounts
    return out


POLICY_KINDS = frozenset({"PropagationPolicy", "ClusterPropagationPolicy"})
LAZY = Switched(
    "lazy",
    "CarbonPolicyLazy",
    "Defer",
    "placement rewritten, not applied yet: activationPreference Lazy makes Karmada wait for "
    "a change of the resource template",
    "placement_deferred",
)
"""How a switch of a policy Karmada applies only once its resource template changes is
said (``activationPreference: Lazy``)."""


class Rebalancing(Keeper):
    """Karmada's keeper: moves replicas of managed ordered fills back to greener tiers
    (:class:`Rebalancer`, ``rebalance.enabled``) and counts the lazy policies, on the
    policies as the re-evaluation left them. A member's room changing
    (``rooms``: :attr:`webhook.kube.inventory.FleetInventory.rooms`) or a Cluster or a
    binding changing in its watched caches brings a pass."""

    name = "rebalance"
    kinds = POLICY_KINDS

    def __init__(
        self,
        follower: Follower,
        *,
        rooms: Callable[[], int] | None = None,
        watched: Watched | None = None,
    ) -> None:
        """``watched``: the Karmada caches it shares (with the carrier); its own without."""
        super().__init__(follower)
        self.rooms = rooms
        self.placed = 0
        """Grows whenever a member Cluster or a binding changed (what a plan reads)."""
        config = follower.config
        self.rebalancer = (
            Rebalancer(
                follower.api,
                config,
                follower.gate,
                events=follower.events,
                watched=watched if watched is not None else Watched(),
            )
            if config.rebalance.enabled
            else None
        )
        if self.rebalancer is not None and self.rebalancer.watched is not None:
            self.rebalancer.watched.follow(self._placed, clusters=True)
        watched = self.rebalancer.watched if self.rebalancer is not None else None
        self.caches = watched.caches if watched is not None else ()
        self.fills: dict[Hashable, Fill] = {}
        self.tiers = Tiers()
        """The fills' tiers, held once across policies."""
        self.lazy: set[Hashable] = set()
        self.rewritten: set[PolicyKey] = set()
        """The policies written since the last pass: Karmada schedules their bindings
        again by itself."""

    def _placed(self, _keys: Collection[str]) -> None:
        """A Cluster or a binding changed: a pass looks at it within a tick."""
        self.placed += 1

    def moved(self) -> tuple[int, ...]:
        return (self.rooms() if self.rooms is not None else 0, self.placed)

    def stand(self, key: Hashable, obj: Obj, *, rewritten: bool) -> bool:
        if DECISION in meta_of(obj).annotations and carry.lazy(obj):
            self.lazy.add(key)
        else:
            self.lazy.discard(key)
        if rewritten:
            self.rewritten.add(policy_key(obj))
        fill = Fill.of(obj, self.tiers)
        if fill is None:
            return self.fills.pop(key, None) is not None or rewritten
        before, self.fills[key] = self.fills.get(key), fill
        if len(self.tiers) > 2 * len(self.fills) + 1000:  # tiers no fill holds any more
            self.tiers.keep(self.fills.values())
        return before != fill or rewritten

    def drop(self, key: Hashable) -> bool:
        self.lazy.discard(key)
        return self.fills.pop(key, None) is not None

    def switched(self, stored: Mapping[str, Any]) -> Switched | None:
        return LAZY if carry.lazy(stored) else None

    async def keep(self, ctx: Context) -> int | None:
        metrics.LAZY_POLICIES.set(len(self.lazy))
        mover = self.rebalancer
        if mover is None:
            return 0
        rewritten, self.rewritten = self.rewritten, set()
        if mover.watched is not None and not mover.watched.synced:
            self.rewritten |= rewritten
            return None
        ranked = self.follower.rules.ranked(ctx)
        await mover.rebalance(list(self.fills.values()), ranked, rewritten)
        return 0
