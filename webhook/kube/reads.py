"""One-shot reads of the ``carbonshift`` commands: what ``carbonshift report`` shows (the
ledger, carbonshift's Events, the managed objects), the fleet ``carbonshift intensity
--clusters`` lists and the namespaces and the Karmada policy CRDs ``carbonshift mutate
--kubeconfig`` reads.

The ledger is the leader's accounting ConfigMap (``accounting.configmap``), kept in the
leader's lease namespace and labelled :data:`~webhook.decision.ledger.LEDGER_LABELS`.
Without ``--namespace`` the report looks it up by label across namespaces
(:func:`ledger`), so it finds the ledger wherever the leader keeps it; with one it reads
that namespace only. Every read says where it looked (:attr:`Source.where`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Collection
from typing import Any, cast

import aiohttp
import orjson
from kubernetes_asyncio import client
from kubernetes_asyncio.client.rest import ApiException

from webhook import kinds
from webhook.decision import ocm
from webhook.decision.karmada.api import POLICY_CRDS, KarmadaApi, crd_overflow, from_crds
from webhook.decision.ledger import LEDGER_LABELS
from webhook.decision.liqo import peers as liqo
from webhook.kube.client import REQUEST_TIMEOUT, body, one_line
from webhook.kube.karmada import plain
from webhook.model.errors import UsageError
from webhook.model.objects import items, meta_of, strings
from webhook.model.vocabulary import DECISION

MANAGED_BY = "app.kubernetes.io/managed-by"
LEDGER_LABEL = "carbonshift.io/ledger"
SELECTOR = f"{MANAGED_BY}={LEDGER_LABELS[MANAGED_BY]}"
"""What the cross-namespace lookup lists: every ConfigMap carbonshift manages (a leader
from before the ``carbonshift.io/ledger`` label is found by the ConfigMap's name)."""


class ClusterUnreachable(RuntimeError):
    """The API server could not be reached, or refused a read (a runtime failure, exit 1)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Source:
    """Where the ledger was read, and what was found there."""

    data: dict[str, str] | None
    """The ConfigMap's ``data``; None when there is no ledger (yet)."""
    where: str
    """One line for the person running the report: where it looked and what it found."""


def unreachable(api: client.ApiClient, exc: BaseException) -> ClusterUnreachable:
    """One line for a request that did not get an answer, or got a refusal."""
    host = api.configuration.host
    if isinstance(exc, ApiException):
        return ClusterUnreachable(f"the API server {host} answered {exc.status} {exc.reason}")
    os_error = getattr(exc, "os_error", exc)
    if isinstance(os_error, OSError) and os_error.errno:
        reason = os.strerror(os_error.errno)
    else:
        reason = one_line(exc) or type(exc).__name__
    if isinstance(exc, TimeoutError):
        reason = "no answer in time"
    return ClusterUnreachable(f"cannot reach the API server {host}: {reason.lower()}")


NETWORK_ERRORS = (aiohttp.ClientError, OSError, TimeoutError)
UNANSWERED = (*NETWORK_ERRORS, ApiException)
"""A request that got no answer or a refusal: what :func:`unreachable` says in one line."""


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
    if response.status in (403, 404):
        response.release()
        return []
    answer = orjson.loads(await body(response))
    return [dict(e) for e in items(answer, "items") if isinstance(e, dict)]


async def _read(core: client.CoreV1Api, namespace: str, name: str) -> dict[str, str] | None:
    try:
        found = await core.read_namespaced_config_map(
            name, namespace, _request_timeout=REQUEST_TIMEOUT
        )
    except ApiException as exc:
        if exc.status != 404:
            raise
        return None
    return dict(strings(found.data))


async def ledger(
    api: client.ApiClient, configmap: str, namespace: str | None, fallback: str
) -> Source:
    """The leader's ledger: in ``namespace`` when given; else the ConfigMap labelled
    ``carbonshift.io/ledger`` (or carbonshift's ConfigMap named ``configmap``) in whichever
    namespace holds it. Several candidates are a :class:`UsageError` naming them (pass
    ``--namespace``); when listing across namespaces is refused, ``fallback``/``configmap``
    is read instead."""
    core = client.CoreV1Api(api)
    if namespace is not None:
        data = await _read(core, namespace, configmap)
        return Source(data, _said(data, f"ConfigMap {namespace}/{configmap}", "--namespace"))
    try:
        listed = await core.list_config_map_for_all_namespaces(
            label_selector=SELECTOR, _request_timeout=REQUEST_TIMEOUT
        )
    except ApiException as exc:
        if exc.status not in (401, 403):
            raise
        data = await _read(core, fallback, configmap)
        why = "listing ConfigMaps across namespaces was refused; pass --namespace NS"
        return Source(data, _said(data, f"ConfigMap {fallback}/{configmap}", why))
    maps = list(items(listed.items))
    named = [c for c in maps if c.metadata.name == configmap]
    labelled = [c for c in maps if strings(c.metadata.labels).get(LEDGER_LABEL)]
    candidates = named or labelled
    if len(candidates) > 1:
        names = ", ".join(sorted(f"{c.metadata.namespace}/{c.metadata.name}" for c in candidates))
        raise UsageError(f"several accounting ConfigMaps ({names}): pass --namespace NS")
    if not candidates:
        looked = f"ConfigMap labelled {LEDGER_LABEL} or named {configmap}"
        return Source(None, f"no accounting yet: no {looked} in any namespace (the leader "
                            "writes it after its first accounting pass)")  # fmt: skip
    [found] = candidates
    data = dict(strings(found.data))
    what = f"ConfigMap {found.metadata.namespace}/{found.metadata.name}"
    return Source(data, _said(data, what, "found by its labels"))


def _said(data: dict[str, str] | None, what: str, how: str) -> str:
    if data is None:
        return f"no accounting yet: no {what} ({how}; the leader writes it after its first pass)"
    return f"accounting read from {what} ({how})"


async def collect(
    api: client.ApiClient,
    configmap: str,
    namespace: str | None,
    fallback: str,
    reasons: Collection[str],
) -> tuple[Source, list[dict[str, Any]], list[dict[str, Any]]]:
    """The ledger (:func:`ledger`), carbonshift's Events (those whose reason is one of
    ``reasons``: :data:`webhook.integrations.EVENT_REASONS`), the managed objects. A request
    without an answer, or refused, raises :class:`ClusterUnreachable`."""
    try:
        return await _collect(api, configmap, namespace, fallback, reasons)
    except (ApiException, *NETWORK_ERRORS) as exc:
        raise unreachable(api, exc) from None


async def _collect(
    api: client.ApiClient,
    configmap: str,
    namespace: str | None,
    fallback: str,
    reasons: Collection[str],
) -> tuple[Source, list[dict[str, Any]], list[dict[str, Any]]]:
    source = await ledger(api, configmap, namespace, fallback)
    events = [e for e in await _events(api) if e.get("reason") in reasons]
    objects: list[dict[str, Any]] = []
    custom = client.CustomObjectsApi(api)
    for row in kinds.REGISTRY:
        try:
            got = await custom.list_cluster_custom_object(
                row.group, row.version, row.resource, _request_timeout=REQUEST_TIMEOUT
            )
        except ApiException as exc:
            if exc.status in (403, 404):
                continue
            raise
        for obj in items(got, "items"):
            if DECISION in meta_of(obj).annotations:
                obj.setdefault("kind", row.kind)
                objects.append(obj)
    return source, events, objects


Listed = tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]
"""The Karmada Clusters, Liqo's virtual nodes and OCM's ManagedClusters of an API server."""


async def fleet(api: client.ApiClient) -> tuple[Listed, ApiException | None]:
    """The Karmada Clusters, Liqo's virtual nodes and OCM's ManagedClusters, and the
    refusal when the API server serves no Cluster CRD (a Liqo cluster, maybe). Nodes not
    readable: no virtual nodes; no OCM: no ManagedClusters."""
    virtual: list[dict[str, Any]] = []
    managed: list[dict[str, Any]] = []
    custom = client.CustomObjectsApi(api)
    missing: ApiException | None = None
    try:
        listed = await custom.list_cluster_custom_object(
            "cluster.karmada.io", "v1alpha1", "clusters", _request_timeout=REQUEST_TIMEOUT
        )
    except ApiException as exc:
        if exc.status != 404:
            raise
        missing, listed = exc, {}
    with contextlib.suppress(ApiException):
        nodes = await client.CoreV1Api(api).list_node(
            label_selector=liqo.SELECTOR, _request_timeout=REQUEST_TIMEOUT
        )
        virtual = list(items(api.sanitize_for_serialization(nodes), "items"))
    with contextlib.suppress(ApiException):
        hub = await custom.list_cluster_custom_object(
            ocm.CLUSTERS.group,
            ocm.CLUSTERS.version,
            ocm.CLUSTERS.plural,
            _request_timeout=REQUEST_TIMEOUT,
        )
        managed = list(items(hub, "items"))
    return (list(items(listed, "items")), virtual, managed), missing


async def namespaces(api: client.ApiClient) -> list[dict[str, Any]]:
    """Every Namespace, as the API server stores it."""
    listed = await client.CoreV1Api(api).list_namespace(_request_timeout=REQUEST_TIMEOUT)
    return list(items(api.sanitize_for_serialization(listed), "items"))


async def karmada_api(api: client.ApiClient) -> KarmadaApi | None:
    """What the Karmada policy CRDs keep (:func:`~webhook.decision.karmada.api.crd_overflow`),
    read once; None when neither is served or they cannot be read (no rights)."""
    extensions = client.ApiextensionsV1Api(api)
    answers = []
    for name in POLICY_CRDS:
        response = cast(
            aiohttp.ClientResponse,
            await extensions.read_custom_resource_definition(
                name, _request_timeout=REQUEST_TIMEOUT, _preload_content=False
            ),
        )
        try:
            crd = await plain(response)
        except ApiException as exc:
            if exc.status == 404:
                continue
            return None
        answers.append(crd_overflow(crd) if isinstance(crd, dict) else None)
    return from_crds(answers)
