"""Read what ``carbonshift report`` shows from the API server."""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.rest import ApiException

from webhook.kube.accounting import NODEPOOLS, POLICIES
from webhook.kube.client import REQUEST_TIMEOUT
from webhook.report.history import REASONS
from webhook.vocabulary import DECISION


async def everything(
    api: client.ApiClient, namespace: str, configmap: str
) -> tuple[dict[str, str] | None, list[dict[str, Any]], list[dict[str, Any]]]:
    """The accounting ConfigMap's data, carbonshift's Events, the managed objects."""
    core = client.CoreV1Api(api)
    try:
        found = await core.read_namespaced_config_map(
            configmap, namespace, _request_timeout=REQUEST_TIMEOUT
        )
        ledger: dict[str, str] | None = dict(found.data or {})
    except ApiException as exc:
        if exc.status != 404:
            raise
        ledger = None
    events: list[dict[str, Any]] = []
    try:
        listed = await client.EventsV1Api(api).list_event_for_all_namespaces(
            _request_timeout=REQUEST_TIMEOUT
        )
        events.extend(
            api.sanitize_for_serialization(event)
            for event in listed.items
            if event.reason in REASONS
        )
    except ApiException as exc:
        if exc.status not in (403, 404):
            raise
    objects: list[dict[str, Any]] = []
    custom = client.CustomObjectsApi(api)
    for group, version, plural, kind in (*POLICIES, NODEPOOLS):
        try:
            got = await custom.list_cluster_custom_object(
                group, version, plural, _request_timeout=REQUEST_TIMEOUT
            )
        except ApiException as exc:
            if exc.status in (403, 404):
                continue
            raise
        for obj in got.get("items") or []:
            if DECISION in ((obj.get("metadata") or {}).get("annotations") or {}):
                obj.setdefault("kind", kind)
                objects.append(obj)
    return ledger, events, objects
