"""The leader carries a managed policy's non-workloads to every cluster its replicas may use.

Every ``carry.interval_seconds`` while this replica leads, the carrier lists the
(Cluster)PropagationPolicies carbonshift placed in tiers and every (Cluster)ResourceBinding,
and keeps one ``spec.requiredBy`` snapshot of its own on each non-workload binding of such a
policy (:func:`webhook.decision.carry.carried`): every cluster the policy's terms and their
overflow tiers name, plus wherever a workload of the policy runs now. Karmada's binding
controller then sends the ConfigMap, Secret or Service to those clusters too, as it does for
the dependencies of a workload. A binding whose policy carbonshift no longer places in tiers
loses the snapshot. Each write is an update guarded by the resourceVersion it read, checked
against the Lease right before it is sent; each time a binding's snapshot is written the
policy gets an Event ``CarbonResourcesCarried`` naming the resource and the clusters.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Mapping
from typing import Any

import structlog
from kubernetes_asyncio import client
from kubernetes_asyncio.client.rest import ApiException

from webhook.decision import carry
from webhook.kube.client import REQUEST_TIMEOUT, absent, error_name, refused
from webhook.kube.events import EventRecorder
from webhook.kube.rebalancer import BINDINGS, PolicyKey, owner, placed
from webhook.kube.writes import Gate, NotLeader, update
from webhook.model.config import Config
from webhook.model.objects import dig, mapping, meta_of
from webhook.model.vocabulary import DECISION
from webhook.runtime import metrics, tasks

log = structlog.get_logger("carbonshift.carry")

Obj = dict[str, Any]
POLICIES = (
    ("policy.karmada.io", "v1alpha1", "propagationpolicies", "PropagationPolicy"),
    ("policy.karmada.io", "v1alpha1", "clusterpropagationpolicies", "ClusterPropagationPolicy"),
)
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


def plan(
    policies: Mapping[PolicyKey, list[str]], bindings: list[Obj]
) -> list[tuple[Obj, list[dict[str, Any]], PolicyKey | None]]:
    """The non-workload bindings whose ``requiredBy`` must change, with the new list and
    the policy carried for (None: the snapshot is removed)."""
    reach: dict[PolicyKey, set[str]] = {k: set(v) for k, v in policies.items()}
    for binding in bindings:
        key = owner(binding)
        if key in reach and carry.is_workload(mapping(binding, "spec")):
            reach[key] |= set(placed(binding))
    out = []
    for binding in bindings:
        spec = mapping(binding, "spec")
        if carry.is_workload(spec):
            continue
        key = owner(binding)
        clusters = reach.get(key) if key is not None else None
        name = carry.snapshot_name(key[0], key[2]) if key is not None else ""
        required = spec.get("requiredBy")
        if key is None:
            continue
        changed = carry.carried(required, (key[1], name), sorted(clusters) if clusters else None)
        if changed is not None:
            out.append((binding, changed, key if clusters else None))
    return out


def _ours(entry: Mapping[str, Any]) -> bool:
    return str(entry.get("name") or "").startswith(carry.SNAPSHOT)


class Carrier:
    """Keeps the requiredBy snapshots of managed policies' non-workload bindings."""

    def __init__(
        self,
        api: client.ApiClient,
        config: Config,
        gate: Gate,
        *,
        events: EventRecorder | None = None,
    ) -> None:
        self.objects = client.CustomObjectsApi(api)
        self.gate = gate
        self.events = events
        self.interval = config.carry.interval_seconds
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Run in the background until :meth:`stop`."""
        run = tasks.while_leading(self.gate, self.interval, self.pass_once, failed=self._failed)
        self._task = asyncio.create_task(run, name="carbonshift-carry")
        log.info("carry_started", interval_seconds=self.interval)

    async def stop(self) -> None:
        await tasks.cancel(self._task)
        self._task = None

    @staticmethod
    def _failed() -> None:
        log.exception("carry_pass_failed")

    async def pass_once(self) -> collections.Counter[str]:
        """One pass: the outcomes (``carried``, ``released``, ``error``)."""
        outcomes: collections.Counter[str] = collections.Counter()
        policies: dict[PolicyKey, list[str]] = {}
        for group, version, plural, kind in POLICIES:
            for policy in await self._list(group, version, plural) or []:
                policy.setdefault("kind", kind)
                clusters = tiered(policy)
                if clusters is not None:
                    meta = meta_of(policy)
                    policies[(kind, meta.namespace, meta.name)] = clusters
        bindings = [b for kind in BINDINGS for b in (await self._list(*kind) or [])]
        for binding, required, key in plan(policies, bindings):
            if not self.gate.leading:
                raise NotLeader("not leading")
            outcome = "carried" if key is not None else "released"
            try:
                await self._write(binding, required)
            except ApiException as exc:
                outcome = "error"
                log.warning(
                    "carry_failed", binding=meta_of(binding).namespaced_name, error=error_name(exc)
                )
            outcomes[outcome] += 1
            metrics.CARRIED.labels(outcome).inc()
            if outcome == "carried" and key is not None:
                await self._announce(binding, key, required)
        return outcomes

    async def _write(self, binding: Obj, required: list[dict[str, Any]]) -> None:
        group, version = str(binding.get("apiVersion") or "").split("/")
        meta = meta_of(binding)
        plural = "resourcebindings" if meta.namespace else "clusterresourcebindings"
        snapshot = {(e.get("namespace") or "", e.get("name")) for e in required if _ours(e)}

        async def read() -> Obj:
            if meta.namespace:
                got = await self.objects.get_namespaced_custom_object(
                    group, version, meta.namespace, plural, meta.name,
                    _request_timeout=REQUEST_TIMEOUT,
                )  # fmt: skip
            else:
                got = await self.objects.get_cluster_custom_object(
                    group, version, plural, meta.name, _request_timeout=REQUEST_TIMEOUT
                )
            return dict(got)

        def change(current: Obj) -> Obj | None:
            spec = dict(mapping(current, "spec"))
            # Others' snapshots as they stand now, ours as planned.
            theirs = [
                e
                for e in spec.get("requiredBy") or []
                if isinstance(e, Mapping)
                and not str(e.get("name") or "").startswith(carry.SNAPSHOT)
            ]
            mine = [e for e in required if (e.get("namespace") or "", e.get("name")) in snapshot]
            wanted = [*theirs, *mine]
            if wanted == (spec.get("requiredBy") or []):
                return None
            if wanted:
                spec["requiredBy"] = wanted
            else:
                spec.pop("requiredBy", None)
            return {**current, "spec": spec}

        async def write(obj: Obj) -> Obj:
            if meta.namespace:
                got = await self.objects.replace_namespaced_custom_object(
                    group, version, meta.namespace, plural, meta.name, obj,
                    _request_timeout=REQUEST_TIMEOUT,
                )  # fmt: skip
            else:
                got = await self.objects.replace_cluster_custom_object(
                    group, version, plural, meta.name, obj, _request_timeout=REQUEST_TIMEOUT
                )
            return dict(got)

        await update(read, change, write, gate=self.gate, resource=f"{plural}.{group}")

    async def _announce(self, binding: Obj, key: PolicyKey, required: list[dict[str, Any]]) -> None:
        if self.events is None:
            return
        kind, namespace, name = key
        resource = mapping(binding, "spec", "resource")
        clusters = sorted(
            str(c.get("name"))
            for e in required
            if _ours(e)
            for c in e.get("clusters") or []
            if isinstance(c, Mapping)
        )
        note = (
            f"{resource.get('kind')} {resource.get('name')} goes to every cluster a replica may "
            f"use ({', '.join(clusters)}): Karmada sends non-workloads to the first tier only"
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

    async def _list(self, group: str, version: str, plural: str) -> list[Obj] | None:
        resource = f"{plural}.{group}"
        try:
            listed = await self.objects.list_cluster_custom_object(
                group, version, plural, _request_timeout=REQUEST_TIMEOUT
            )
        except ApiException as exc:
            if not (refused(exc, "list", resource) or absent(exc, resource)):
                log.warning("carry_list_failed", resource=resource, error=error_name(exc))
            return None
        found = listed.get("items") or []
        for item in found:
            item.setdefault("apiVersion", f"{group}/{version}")
        return [dict(i) for i in found if isinstance(i, Mapping)]
