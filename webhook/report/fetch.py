"""Read what ``carbonshift report`` shows from the API server."""

from __future__ import annotations

from typing import Any, cast

import aiohttp
import orjson
from kubernetes_asyncio import client
from kubernetes_asyncio.client.rest import ApiException

from webhook.kube.accounting import NODEPOOLS, POLICIES
from webhook.kube.client import REQUEST_TIMEOUT
from webhook.model.objects import meta_of
from webhook.model.vocabulary import DECISION
from webhook.report.history import REASONS


async def _events(api: client.ApiClient) -> list[dict[str, Any]]:
    """Every ``events.k8s.io/v1`` Event as the API server wrote it (none when refused).

    Read as plain JSON: the client's model refuses Events without ``eventTime``, which
    every Event written through the core ``v1`` API (controllers, Karmada) lacks."""
    response = cast(
        aiohttp.ClientResponse,
        await client.EventsV1Api(api).list_event_for_all_namespaces(
            _request_timeout=REQUEST_TIMEOUT, _preload_content=False
        ),
    )
    try:
        if response.status in (403, 404):
            return []
        body = await response.read()
        if not 200 <= response.status <= 299:
            raise ApiException(status=response.status, reason=body.decode(errors="replace"))
    finally:
        response.release()
    items = orjson.loads(body).get("items") or []
    return [e for e in items if isinstance(e, dict)]


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
    events = [e for e in await _events(api) if e.get("reason") in REASONS]
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
            if DECISION in meta_of(obj).annotations:
                obj.setdefault("kind", kind)
                objects.append(obj)
    return ledger, events, objects
