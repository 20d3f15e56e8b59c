"""Writes to the API server: only by the leader, and never over someone else's change.

- :func:`apply_metadata`: server-side apply of labels and annotations with field manager
  ``carbonshift`` (carbonshift owns exactly the keys it sends; other managers keep theirs).
  The ``resourceVersion`` read with the object may be passed as a precondition.
- :func:`update`: read, change, replace with the ``resourceVersion`` read (optimistic
  concurrency); a 409 Conflict re-reads and tries again.

Each write checks the :class:`Gate` (the leader elector) right before it is sent and
raises :class:`NotLeader` when this replica does not lead.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from kubernetes_asyncio import client
from kubernetes_asyncio.client.rest import ApiException

from webhook.kube.client import FIELD_MANAGER, REQUEST_TIMEOUT, refused
from webhook.model.errors import NotLeader as NotLeader  # noqa: PLC0414 - callers import it here
from webhook.model.resources import Resource
from webhook.runtime import metrics

Obj = dict[str, Any]


class Gate(Protocol):
    """Whether this replica may write now (:class:`~webhook.kube.leader.LeaderElector`)."""

    @property
    def leading(self) -> bool: ...


def _check(gate: Gate | None) -> None:
    if gate is not None and not gate.leading:
        raise NotLeader("not the leader: carbonshift writes only from the leading replica")


def apply_options() -> Obj:
    """The call options of a server-side apply: field manager ``carbonshift``, forced (it
    owns exactly the fields it sends)."""
    return {
        "field_manager": FIELD_MANAGER,
        "force": True,
        "_content_type": "application/apply-patch+yaml",
        "_request_timeout": REQUEST_TIMEOUT,
    }


async def apply_metadata(
    api: client.ApiClient,
    gate: Gate | None,
    resource: Resource,
    *,
    name: str,
    namespace: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    resource_version: str | None = None,
) -> Obj:
    """Server-side apply of labels/annotations on an existing object of ``resource`` (a
    custom resource, or a Node: the core API's ``nodes``); returns it.

    A 403 is logged once (verb ``patch``) and raised; so is anything else."""
    metadata: Obj = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    if labels is not None:
        metadata["labels"] = dict(labels)
    if annotations is not None:
        metadata["annotations"] = dict(annotations)
    if resource_version:
        metadata["resourceVersion"] = resource_version
    group, version, plural = resource.group, resource.version, resource.plural
    body: Obj = {"apiVersion": resource.api_version, "kind": resource.kind, "metadata": metadata}
    objects = client.CustomObjectsApi(api)
    options = apply_options()
    _check(gate)
    try:
        if not group and plural == "nodes":  # the core group: Liqo's virtual nodes
            node = await client.CoreV1Api(api).patch_node(name, body, **options)
            result = api.sanitize_for_serialization(node) if node is not None else None
        elif namespace:
            result = await objects.patch_namespaced_custom_object(
                group, version, namespace, plural, name, body, **options
            )
        else:
            result = await objects.patch_cluster_custom_object(
                group, version, plural, name, body, **options
            )
    except ApiException as exc:
        if exc.status == 409:
            metrics.KUBE_CONFLICTS.labels(resource.name).inc()
        refused(exc, "patch", resource.name)
        raise
    if result is None:  # 201 Created: the client maps only 200 to a body
        raise ApiException(status=404, reason=f"{resource.name} {name} did not exist")
    got: Obj = result
    return got


async def update(
    read: Callable[[], Awaitable[Obj]],
    change: Callable[[Obj], Obj | None],
    write: Callable[[Obj], Awaitable[Obj]],
    *,
    gate: Gate | None,
    resource: str,
    attempts: int = 5,
) -> Obj | None:
    """Read, change, write with the read ``resourceVersion``; on 409 re-read and redo.

    ``change`` returns the new object (keeping ``metadata.resourceVersion``) or None for
    nothing to do; the result is what the server stored, or None when nothing changed."""
    for attempt in range(attempts):
        current = await read()
        wanted = change(current)
        if wanted is None:
            return None
        _check(gate)
        try:
            return await write(wanted)
        except ApiException as exc:
            if exc.status != 409 or attempt == attempts - 1:
                refused(exc, "update", resource)
                raise
            metrics.KUBE_CONFLICTS.labels(resource).inc()
    raise AssertionError("unreachable")  # pragma: no cover
