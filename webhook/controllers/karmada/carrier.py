"""The leader carries a managed policy's non-workloads to every cluster its replicas may use.

While this replica leads, the carrier follows watched caches of the
(Cluster)PropagationPolicies (held as the clusters carbonshift's tiers name, or nothing)
and of every (Cluster)ResourceBinding (held slim: what a plan reads), passes as soon as
one of them changed (and every ``carry.interval_seconds`` as a safety net), and keeps one
``spec.requiredBy`` snapshot of its own on each non-workload binding of such a policy
(:func:`webhook.decision.karmada.carry.carried`): every cluster the policy's terms and
their overflow tiers name, plus wherever a workload of the policy runs now. Karmada's
binding controller then sends the ConfigMap, Secret or Service to those clusters too, as
it does for the dependencies of a workload. A binding whose policy carbonshift no longer
places in tiers loses the snapshot. Each write is an update guarded by the resourceVersion
it read, checked against the Lease right before it is sent; each time a binding's
snapshot is written the policy gets an Event ``CarbonResourcesCarried`` naming the
resource and the clusters.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import structlog
from kubernetes_asyncio import client
from kubernetes_asyncio.client.rest import ApiException

from webhook.controllers.karmada.rebalancer import Watched
from webhook.controllers.runner import Controller
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


class Carrier(Controller):
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
        self.changes = 0
        """Grows whenever a policy's tiers or a binding changed in the caches."""
        self._passed: int | None = None
        self.policies = {
            row.kind: WatchedCache(row.api, _tiers, kind=row.kind.lower(), on_keys=self._changed)
            for row in POLICIES
        }
        shared = watched is not None
        watched = watched if watched is not None else Watched()
        self.bindings = watched.bindings
        watched.listen(self._changed, clusters=False)
        self.caches: tuple[WatchedCache[Any], ...] = (*self.policies.values(), *self.bindings)
        self._own: tuple[WatchedCache[Any], ...] = (
            tuple(self.policies.values()) if shared else self.caches
        )
        """The caches it stops (shared ones are stopped by their other reader)."""
        self._following = False

    def _changed(self, _keys: Collection[str]) -> None:
        self.changes += 1

    def start(self) -> None:
        """Follow the caches, then pass (at once on a change once they have synced)."""
        for cache in self.caches:
            cache.start(self.api)
        self._following = True
        super().start()

    async def stop(self) -> None:
        await super().stop()
        for cache in self._own:
            await cache.stop()
        self._following = False

    def changed(self) -> bool:
        return self._following and self.changes != self._passed and self._synced()

    def _synced(self) -> bool:
        return all(cache.synced for cache in self.caches)

    async def reconcile(self) -> collections.Counter[str]:
        """One pass: the outcomes (``carried``, ``released``, ``error``). Not started, it
        lists the caches once first (tests, a one-off pass)."""
        outcomes: collections.Counter[str] = collections.Counter()
        if not self._following:
            for cache in self.caches:
                try:
                    await cache.list_once(self.api)
                except ApiException as exc:
                    log.warning("carry_list_failed", resource=str(cache), error=error_name(exc))
        if not self._synced():
            return outcomes  # nothing to carry until every list is known
        self._passed = self.changes
        policies: dict[PolicyKey, list[str]] = {}
        for kind, cache in self.policies.items():
            for key, clusters in cache.items().items():
                if clusters is not None:
                    namespace, _, name = key.rpartition("/")
                    policies[(kind, namespace, name)] = list(clusters)
        bindings = [b for cache in self.bindings for b in cache.items().values()]
        for step in plan(policies, bindings):
            if not self.gate.leading:
                raise NotLeader("not leading")
            outcome = "carried" if step.clusters is not None else "released"
            try:
                await self._write(step)
            except ApiException as exc:
                outcome = "error"
                name = meta_of(step.binding).namespaced_name
                log.warning("carry_failed", binding=name, error=error_name(exc))
            outcomes[outcome] += 1
            metrics.CARRIED.labels(outcome).inc()
            if outcome == "carried":
                await self._announce(step)
        return outcomes

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
