"""Lease-based leader election (``coordination.k8s.io/v1``), as controller-runtime does it.

One Lease (``carbonshift-leader`` in carbonshift's namespace by default); 15 s lease,
10 s renew deadline, 2 s retry. Every write to the Lease carries the ``resourceVersion``
it read (a 409 means someone else moved first: not acquired). A Lease held by someone
else is taken over once its record has not changed for ``leaseDurationSeconds`` as
measured on this replica's own clock (clock skew between replicas does not matter), or at
once when its holder released it (empty ``holderIdentity``).

:attr:`LeaderElector.leading` is what writers check: it turns False the moment a renewal
is refused or the last successful renewal is older than the renew deadline, even if the
elector loop itself is late. :meth:`LeaderElector.stop` releases the Lease so another
replica takes over without waiting for it to expire. ``carbonshift_leader`` is 1 while
leading.

kubernetes-asyncio's own ``leaderelection`` is not used: it never releases and stamps
naive local times.
"""

from __future__ import annotations

import asyncio
import datetime
import random
import time
from typing import Any, cast

import structlog
from kubernetes_asyncio import client
from kubernetes_asyncio.client.rest import ApiException

from webhook.kube.client import REQUEST_TIMEOUT, Outage
from webhook.runtime import metrics, tasks

log = structlog.get_logger("carbonshift.leader")

LEASE_NAME = "carbonshift-leader"


def _micro_time(at: datetime.datetime) -> str:
    return at.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Campaigns for one Lease and keeps it while renewals succeed."""

    def __init__(
        self,
        api: client.ApiClient,
        identity: str,
        *,
        namespace: str,
        name: str = LEASE_NAME,
        lease_seconds: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
    ) -> None:
        if not lease_seconds > renew_deadline > 1.2 * retry_period > 0:
            raise ValueError("need lease_seconds > renew_deadline > 1.2 * retry_period > 0")
        self.leases = client.CoordinationV1Api(api)
        self.identity = identity
        self.namespace = namespace
        self.name = name
        self.lease_seconds = lease_seconds
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.outage = Outage("leases.coordination.k8s.io", "leader election")
        self._leading = False
        self._renewed = 0.0
        self._observed: str | None = None
        self._observed_at = 0.0
        self._verb = "get"
        """The Lease call in flight (named in an RBAC refusal)."""
        self._task: asyncio.Task[None] | None = None

    @property
    def leading(self) -> bool:
        """True while this replica holds the Lease and renewed it within the deadline."""
        return self._leading and time.monotonic() - self._renewed < self.renew_deadline

    # --- the loop ---------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self.run(), name="leader-election")

    async def stop(self) -> None:
        """Stop campaigning and release the Lease if held."""
        await tasks.cancel(self._task)
        self._task = None
        await self.release()

    async def run(self) -> None:
        """Campaign and renew until cancelled; never raises otherwise."""
        log.info("leader_election_started", lease=f"{self.namespace}/{self.name}")
        while True:
            self._verb = "get"
            try:
                held = await self._try_acquire_or_renew()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                held = False
                self.outage.failed(exc, self._verb)
            else:
                self.outage.recovered()
            now = time.monotonic()
            if held:
                self._renewed = now
                if not self._leading:
                    self._set(True)
            elif self._leading and (now - self._renewed >= self.renew_deadline or held is None):
                self._set(False)
            jitter = 1.0 if self._leading else random.uniform(1.0, 1.2)  # noqa: S311
            pause = self.retry_period * jitter
            await asyncio.sleep(pause)

    def _set(self, leading: bool) -> None:
        self._leading = leading
        metrics.LEADER.set(1 if leading else 0)
        if leading:
            log.info(
                "leader_elected", identity=self.identity, lease=f"{self.namespace}/{self.name}"
            )
        else:
            log.warning("leader_lost", identity=self.identity, hint="writes stop until re-elected")

    async def _try_acquire_or_renew(self) -> bool | None:
        """True: held now. False: not acquired (yet). None: someone else holds it (lose at once)."""
        now = datetime.datetime.now(datetime.UTC)
        try:
            lease = await self.leases.read_namespaced_lease(
                self.name, self.namespace, _request_timeout=REQUEST_TIMEOUT
            )
        except ApiException as exc:
            if exc.status != 404:
                raise
            self._verb = "create"
            return await self._create(now)
        spec = lease.spec or client.V1LeaseSpec()
        version = lease.metadata.resource_version
        if version != self._observed:
            self._observed, self._observed_at = version, time.monotonic()
        holder = spec.holder_identity or ""
        duration = spec.lease_duration_seconds or self.lease_seconds
        fresh = time.monotonic() - self._observed_at < duration
        if holder and holder != self.identity and fresh:
            return None if self._leading else False
        ours = holder == self.identity
        acquired = spec.acquire_time if ours and spec.acquire_time else now
        body: dict[str, Any] = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "resourceVersion": version,
            },
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": round(self.lease_seconds),
                "acquireTime": _micro_time(acquired),
                "renewTime": _micro_time(now),
                "leaseTransitions": (spec.lease_transitions or 0) + (0 if ours else 1),
            },
        }
        self._verb = "update"
        try:
            await self.leases.replace_namespaced_lease(
                self.name, self.namespace, cast(Any, body), _request_timeout=REQUEST_TIMEOUT
            )
        except ApiException as exc:
            if exc.status == 409:  # someone else wrote it since we read it
                return None if self._leading else False
            raise
        return True

    async def _create(self, now: datetime.datetime) -> bool:
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": round(self.lease_seconds),
                "acquireTime": _micro_time(now),
                "renewTime": _micro_time(now),
                "leaseTransitions": 0,
            },
        }
        try:
            await self.leases.create_namespaced_lease(
                self.namespace, cast(Any, body), _request_timeout=REQUEST_TIMEOUT
            )
        except ApiException as exc:
            if exc.status == 409:  # created by another replica first
                return False
            raise
        return True

    async def release(self) -> None:
        """Give the Lease up (empty holder) so another replica takes over at once."""
        if not self._leading:
            return
        self._set(False)  # stop writing before anything else
        try:
            lease = await self.leases.read_namespaced_lease(
                self.name, self.namespace, _request_timeout=REQUEST_TIMEOUT
            )
            if (lease.spec and lease.spec.holder_identity) != self.identity:
                return
            now = datetime.datetime.now(datetime.UTC)
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {
                    "name": self.name,
                    "namespace": self.namespace,
                    "resourceVersion": lease.metadata.resource_version,
                },
                "spec": {
                    "holderIdentity": None,
                    "leaseDurationSeconds": 1,
                    "renewTime": _micro_time(now),
                    "acquireTime": _micro_time(now),
                    "leaseTransitions": lease.spec.lease_transitions or 0,
                },
            }
            await self.leases.replace_namespaced_lease(
                self.name, self.namespace, cast(Any, body), _request_timeout=REQUEST_TIMEOUT
            )
            log.info("leader_released", identity=self.identity)
        except Exception as exc:
            log.warning("leader_release_failed", error=str(exc)[:300])
