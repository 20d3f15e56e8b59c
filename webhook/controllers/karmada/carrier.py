"""The leader carries a managed policy's non-workloads to every cluster its replicas may use.

A keyed controller (:class:`~webhook.controllers.runner.KeyedController`): one policy per
``reconcile``. It follows watched caches of the (Cluster)PropagationPolicies (held as the
clusters carbonshift's tiers name, or nothing) and of every (Cluster)ResourceBinding (held
slim: what a plan reads; shared with the rebalancer), and keeps an index of each policy's
bindings (Karmada's annotations name the policy). A term starts once every cache has
synced, with every policy queued once; after that a policy is queued when its tiers change
or one of its bindings changes (appears, moves, goes), and again every
``carry.interval_seconds`` as a safety net. For the policy it keeps one ``spec.requiredBy``
snapshot of its own on each of its non-workload bindings
(:func:`webhook.decision.karmada.carry.carried`): every cluster the policy's terms and
their overflow tiers name, plus wherever a workload of the policy runs now. Karmada's
binding controller then sends the ConfigMap, Secret or Service to those clusters too, as
it does for the dependencies of a workload. A binding whose policy carbonshift no longer
places in tiers loses the snapshot. Each write is an update guarded by the resourceVersion
it read, checked against the Lease right before it is sent; each time a binding's
snapshot is written the policy gets an Event ``CarbonResourcesCarried`` naming the
resource and the clusters. A write the API server refuses is logged and the policy retried
with its back-off.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import structlog
from kubernetes_asyncio import client
from kubernetes_asyncio.client.rest import ApiException

from webhook.controllers.karmada.rebalancer import Watched
from webhook.controllers.runner import KeyedController, Retry
from webhook.decision.karmada import carry
from webhook.decision.karmada.bindings import PolicyKey, owner, placed
from webhook.kinds.policies import CLUSTER_PROPAGATION_POLICY, PROPAGATION_POLICY
from webhook.kube.cache import WatchedCache
from webhook.kube.client import REQUEST_TIMEOUT, error_name
from webhook.kube.events import EventRecorder
from webhook.kube.writes import Gate, NotLeader, update
from webhook.model.config import Config
from webhook.model.objects import Obj, dig, mapping, meta_of
from webhook.model.vocabulary import DECISION
from webhook.runtime import metrics
from webhook.runtime.workqueue import WorkQueue

log = structlog.get_logger("carbonshift.carry")

Raw = dict[str, Any]
POLICIES = (PROPAGATION_POLICY, CLUSTER_PROPAGATION_POLICY)
CARRIED = "CarbonResourcesCarried"


def tiered(policy: Mapping[str, Any]) -> list[str] | None:
    """The clusters a managed policy's tiers name, or None when carbonshift does not place
    it in tiers."""
    if DECISION not in meta_of(policy).annotations:
        return None
    placement = dig(policy, "spec", "placement")
    if not isinstance(placement, Mapping) or not carry.carbonshift_terms(placement):
        return None
    return carry.replica_reach(placement)


@dataclasses.dataclass(frozen=True, slots=True)
class Carry:
    """One non-workload binding whose snapshot must change."""

    binding: Raw
    policy: PolicyKey
    clusters: tuple[str, ...] | None
    """Where the snapshot sends the resource; None: the snapshot goes."""

    @property
    def snapshot(self) -> tuple[str, str]:
        """(namespace, name) of carbonshift's ``requiredBy`` entry."""
        kind, namespace, name = self.policy
        return namespace, carry.snapshot_name(kind, name)

    def required_by(self, binding: Mapping[str, Any]) -> list[dict[str, Any]] | None:
        """``binding``'s new ``requiredBy`` (None: it already stands so)."""
        found = dig(binding, "spec", "requiredBy")
        return carry.carried(found, self.snapshot, self.clusters)


def plan(policies: Mapping[PolicyKey, list[str]], bindings: Sequence[Raw]) -> list[Carry]:
    """The non-workload bindings whose ``requiredBy`` must change: carried to every cluster
    of their policy's tiers and wherever a workload of it runs, or released."""
    reach: dict[PolicyKey, set[str]] = {k: set(v) for k, v in policies.items()}
    others: list[tuple[Raw, PolicyKey]] = []
    for binding in bindings:
        key = owner(binding)
        if key is None:
            continue
        if not carry.is_workload(mapping(binding, "spec")):
            others.append((binding, key))
        elif key in reach:
            reach[key] |= set(placed(binding))
    out = []
    for binding, key in others:
        clusters = reach.get(key)
        step = Carry(binding, key, tuple(sorted(clusters)) if clusters else None)
        if step.required_by(binding) is not None:
            out.append(step)
    return out


def _tiers(obj: Mapping[str, Any], _before: tuple[str, ...] | None) -> tuple[str, ...] | None:
    clusters = tiered(obj)
    return None if clusters is None else tuple(clusters)


def _same(before: Sequence[object], now: Sequence[object]) -> bool:
    """The same objects, one for one (a cache replaces an object that changed)."""
    return len(before) == len(now) and all(a is b for a, b in zip(before, now, strict=True))


def _policy_key(kind: str, key: str) -> PolicyKey:
    """A policy's key from its kind and its cache key (``namespace/name``, or ``name``)."""
    namespace, _, name = key.rpartition("/")
    return kind, namespace, name


class Carrier(KeyedController[PolicyKey]):
    """Keeps the requiredBy snapshots of managed policies' non-workload bindings."""

    name = "carry"

    def __init__(
        self,
        api: client.ApiClient,
        config: Config,
        gate: Gate,
        *,
        events: EventRecorder | None = None,
        watched: Watched | None = None,
    ) -> None:
        """``watched``: the Karmada caches it shares with the rebalancer (their bindings
        are read); without, caches of its own."""
        self.api = api
        self.objects = client.CustomObjectsApi(api)
        self.gate = gate
        self.events = events
        self.interval = config.carry.interval_seconds
        self.queue = WorkQueue()
        self.outcomes: collections.Counter[str] = collections.Counter()
        """Outcomes since the replica started (``carried``, ``released``, ``error``)."""
        self.policies = {
            row.kind: WatchedCache(
                row.api,
                _tiers,
                kind=row.kind.lower(),
                on_keys=functools.partial(self._policies_changed, row.kind),
            )
            for row in POLICIES
        }
        shared = watched is not None
        watched = watched if watched is not None else Watched()
        self.bindings = watched.bindings
        watched.follow(self._bindings_changed, clusters=False)
        self.caches: tuple[WatchedCache[Any], ...] = (*self.policies.values(), *self.bindings)
        self.owned = tuple(self.policies.values()) if shared else self.caches
        self._owners: dict[str, PolicyKey] = {}
        """Binding key -> the policy that made it."""
        self._bound: dict[PolicyKey, set[str]] = {}
        """Policy -> the keys of its bindings."""
        self._planned: dict[PolicyKey, tuple[tuple[str, ...] | None, tuple[Raw, ...]]] = {}
        """Policy -> the tiers and the bindings (as the caches hold them) it was last
        planned on, with nothing left to write."""

    # --- what is queued -------------------------------------------------------------------

    def _policies_changed(self, kind: str, keys: Collection[str]) -> None:
        self.enqueue(_policy_key(kind, key) for key in keys)

    def _bindings_changed(self, keys: Collection[str]) -> None:
        """Index the bindings by policy; queue the policies whose bindings changed."""
        touched: set[PolicyKey] = set()
        for key in keys:
            binding = self._binding(key)
            new = owner(binding) if binding is not None else None
            old = self._owners.get(key)
            if old != new:
                if old is not None:
                    self._bound[old].discard(key)
                    if not self._bound[old]:
                        del self._bound[old]
                if new is None:
                    del self._owners[key]
                else:
                    self._owners[key] = new
                    self._bound.setdefault(new, set()).add(key)
            touched.update(k for k in (old, new) if k is not None)
        self.enqueue(sorted(touched))

    def _binding(self, key: str) -> Raw | None:
        for cache in self.bindings:
            if (found := cache.get(key)) is not None:
                return found
        return None

    def keys(self) -> list[PolicyKey]:
        """Every policy placed in tiers, and every policy with bindings."""
        tiered = {
            _policy_key(kind, key)
            for kind, cache in self.policies.items()
            for key, clusters in cache.items().items()
            if clusters is not None
        }
        return sorted(tiered | self._bound.keys())

    # --- one policy -----------------------------------------------------------------------

    async def reconcile(self, key: PolicyKey) -> float | None:
        """Bring the snapshots on ``key``'s non-workload bindings up to date; seconds until
        it is looked at again (``carry.interval_seconds``, the safety net)."""
        kind, namespace, name = key
        cache = self.policies.get(kind)
        clusters = cache.get(f"{namespace}/{name}" if namespace else name) if cache else None
        bound = (self._binding(k) for k in sorted(self._bound.get(key, ())))
        bindings = tuple(b for b in bound if b is not None)
        if clusters is None and not bindings:
            self._planned.pop(key, None)
            return None  # gone, or never carbonshift's: nothing to keep
        held = self._planned.get(key)
        if held is not None and held[0] == clusters and _same(held[1], bindings):
            return self.interval  # planned on these very objects: nothing can have changed
        failed = False
        for step in plan({key: list(clusters)} if clusters is not None else {}, bindings):
            if not self.gate.leading:
                return None  # the term ends: the next one queues every policy
            outcome = "carried" if step.clusters is not None else "released"
            try:
                await self._write(step)
            except NotLeader:
                return None
            except ApiException as exc:
                outcome, failed = "error", True
                binding = meta_of(step.binding).namespaced_name
                log.warning("carry_failed", binding=binding, error=error_name(exc))
            self.outcomes[outcome] += 1
            metrics.CARRIED.labels(outcome).inc()
            if outcome == "carried":
                await self._announce(step)
        if failed:
            raise Retry(f"a binding of {kind} {namespace}/{name} was not written")
        self._planned[key] = (clusters, bindings)
        return self.interval

    def lost(self) -> None:
        self._planned = {}

    async def sync(self) -> collections.Counter[str]:
        """Every policy reconciled once, as a term's first sync does (tests, a one-off
        pass): the outcomes. Not started, it lists the caches once first."""
        for cache in self.caches:
            if not cache.following:
                try:
                    await cache.list_once(self.api)
                except ApiException as exc:
                    log.warning("carry_list_failed", resource=str(cache), error=error_name(exc))
        if not self.synced():
            return collections.Counter()  # nothing to carry until every list is known
        before = collections.Counter(self.outcomes)
        await self.reconcile_all()
        return self.outcomes - before

    async def _write(self, step: Carry) -> None:
        """Update the binding's ``requiredBy`` as :meth:`Carry.required_by` says, on what
        the API server holds now (others' snapshots as they stand)."""
        binding = Obj(step.binding)
        group, version, meta = binding.group, binding.version, binding.meta
        namespace, name = meta.namespace, meta.name
        plural = "resourcebindings" if namespace else "clusterresourcebindings"
        timeout = REQUEST_TIMEOUT

        async def read() -> Raw:
            if namespace:
                got = await self.objects.get_namespaced_custom_object(
                    group, version, namespace, plural, name, _request_timeout=timeout
                )
            else:
                got = await self.objects.get_cluster_custom_object(
                    group, version, plural, name, _request_timeout=timeout
                )
            return dict(got)

        def change(current: Raw) -> Raw | None:
            wanted = step.required_by(current)
            if wanted is None:
                return None
            spec = dict(mapping(current, "spec"))
            if wanted:
                spec["requiredBy"] = wanted
            else:
                spec.pop("requiredBy", None)
            return {**current, "spec": spec}

        async def write(obj: Raw) -> Raw:
            if namespace:
                got = await self.objects.replace_namespaced_custom_object(
                    group, version, namespace, plural, name, obj, _request_timeout=timeout
                )
            else:
                got = await self.objects.replace_cluster_custom_object(
                    group, version, plural, name, obj, _request_timeout=timeout
                )
            return dict(got)

        await update(read, change, write, gate=self.gate, resource=f"{plural}.{group}")

    async def _announce(self, step: Carry) -> None:
        if self.events is None:
            return
        kind, namespace, name = step.policy
        resource = mapping(step.binding, "spec", "resource")
        note = (
            f"{resource.get('kind')} {resource.get('name')} goes to every cluster a replica may "
            f"use ({', '.join(step.clusters or ())}): Karmada sends non-workloads to the first "
            "tier only"
        )
        policy = {
            "apiVersion": "policy.karmada.io/v1alpha1",
            "kind": kind,
            "metadata": {"name": name, **({"namespace": namespace} if namespace else {})},
        }
        try:
            await self.events.emit(policy, reason=CARRIED, note=note, action="Carry")
        except ApiException as exc:
            log.warning("carry_event_failed", policy=name, error=error_name(exc))
