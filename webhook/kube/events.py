"""Kubernetes Events (``events.k8s.io/v1``) about the objects carbonshift acts on.

Reporting controller ``carbonshift.io/carbonshift``, this replica as reporting instance.
An Event about a namespaced object goes into its namespace; about a cluster-scoped one
(a Karmada Cluster, a NodePool) into ``default``, as the API server requires. Events are
best effort: a failure is logged and counted, never raised (RBAC 403: one error log).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from typing import Any, Literal, cast

import structlog
from kubernetes_asyncio import client

from webhook.kube.client import REQUEST_TIMEOUT, error_name, refused
from webhook.kube.writes import Gate
from webhook.model.objects import meta_of
from webhook.runtime import metrics

log = structlog.get_logger("carbonshift.events")

REPORTING_CONTROLLER = "carbonshift.io/carbonshift"
RESOURCE = "events.events.k8s.io"


class EventRecorder:
    """Writes Events; with a gate, only while this replica leads."""

    def __init__(self, api: client.ApiClient, instance: str, gate: Gate | None = None) -> None:
        self.api = api
        self.events = client.EventsV1Api(api)
        self.instance = instance[:128]
        self.gate = gate

    async def emit(
        self,
        regarding: Mapping[str, Any],
        *,
        reason: str,
        note: str,
        action: str,
        type: Literal["Normal", "Warning"] = "Normal",
        key: str | None = None,
    ) -> dict[str, Any] | None:
        """Record one Event about ``regarding`` (an object or just its apiVersion, kind and
        metadata); returns the stored Event, or None when it was not written.

        With ``key`` the Event's name is fixed (``<object>.<key>``), so recording the same
        occurrence again (a new leader making up for one its predecessor wrote but could
        not announce) leaves exactly one Event."""
        if self.gate is not None and not self.gate.leading:
            return None
        meta = meta_of(regarding)
        name, namespace = meta.name, meta.namespace
        prefix = re.sub(r"[^a-z0-9-]", "-", name.lower())[:200].strip("-") or "carbonshift"
        ref = {
            "apiVersion": regarding.get("apiVersion"),
            "kind": regarding.get("kind"),
            "name": name,
            "namespace": namespace,
            "uid": meta.uid,
            "resourceVersion": meta.resource_version,
        }
        body = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {
                **({"name": f"{prefix[:200]}.{key}"} if key else {"generateName": prefix + "-"}),
                "namespace": namespace or "default",
            },
            "eventTime": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "reportingController": REPORTING_CONTROLLER,
            "reportingInstance": self.instance,
            "action": action[:128],
            "reason": reason[:128],
            "type": type,
            "note": note[:1024],
            "regarding": {k: v for k, v in ref.items() if v},
        }
        try:
            created = await self.events.create_namespaced_event(
                namespace or "default", cast(Any, body), _request_timeout=REQUEST_TIMEOUT
            )
        except Exception as exc:
            if key and getattr(exc, "status", None) == 409:
                return None  # this occurrence is recorded already
            metrics.KUBE_ERRORS.labels(RESOURCE, error_name(exc)).inc()
            if not refused(exc, "create", RESOURCE):
                log.warning("event_not_written", reason=reason, error=str(exc)[:300])
            return None
        result: dict[str, Any] = self.api.sanitize_for_serialization(created)
        return result
