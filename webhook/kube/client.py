"""Connecting to the API server, and how every adapter in this package meets its errors.

:func:`settings` finds the connection (``--kubeconfig FILE``, then ``KUBECONFIG``, then the
in-cluster service account); ``None`` means carbonshift runs without a cluster, exactly as
before. :func:`connect` opens one ``ApiClient`` for the process.

:class:`Backoff` is a jittered exponential delay; :class:`Outage` logs one warning when
calls start failing and one line when they work again (not one per retry), and counts
every failure in ``carbonshift_kube_errors_total``. :func:`refused` turns an RBAC 403 into
one clear error log naming the verb and resource (once per verb and resource) and
``carbonshift_kube_forbidden_total``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import random
import re
import socket
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import structlog
from kubernetes_asyncio import client
from kubernetes_asyncio import config as kube_config
from kubernetes_asyncio.client.rest import ApiException

from webhook.model.objects import items, text
from webhook.model.resources import Resource
from webhook.model.validation import InvalidInput
from webhook.runtime import metrics

log = structlog.get_logger("carbonshift.kube")

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
FIELD_MANAGER = "carbonshift"
"""Field manager of every server-side apply carbonshift sends."""
REQUEST_TIMEOUT = (5.0, 30.0)
"""(connect, read) seconds for one non-watch call."""
LIST_PAGE = 500
"""Objects per list call of the leader's passes: a pass holds one page of a kind at a
time, never every object (the API server's own default chunk size)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    """How to reach the API server, and who this replica is."""

    kubeconfig: Path | None
    """None: the in-cluster service account."""
    namespace: str
    """carbonshift's own namespace (its Lease lives there)."""
    identity: str
    """This replica's name in the leader Lease (the pod name when known)."""
    lease: str = "carbonshift-leader"
    """Name of the leader Lease."""


def settings(
    kubeconfig: str | None,
    *,
    namespace: str | None = None,
    default_namespace: str,
    lease: str = "carbonshift-leader",
) -> Settings | None:
    """The connection to use, or None when there is no kubeconfig and no cluster.

    ``kubeconfig`` (the ``--kubeconfig`` flag) wins over ``KUBECONFIG``; without either,
    a pod's service account is used when ``KUBERNETES_SERVICE_HOST`` is set. The namespace
    is ``namespace``, else ``POD_NAMESPACE``, else the service account's, else
    ``default_namespace`` (the config's ``service.namespace``).
    """
    path = kubeconfig or os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or None
    in_cluster = (
        bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and (SERVICE_ACCOUNT / "token").is_file()
    )
    if path is None and not in_cluster:
        return None
    ns_file = SERVICE_ACCOUNT / "namespace"
    found = (
        namespace
        or os.environ.get("POD_NAMESPACE")
        or (ns_file.read_text().strip() if path is None and ns_file.is_file() else "")
        or default_namespace
    )
    identity = os.environ.get("POD_NAME") or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
    return Settings(Path(path) if path else None, found, identity, lease)


def one_line(text: object) -> str:
    """``text`` on one line (an error message from a library, for a one-line error)."""
    return re.sub(r"\s+", " ", str(text)).strip()


def kubeconfig_problem(path: Path) -> str | None:
    """Why the kubeconfig at ``path`` cannot be read (missing, a directory, unreadable),
    before the Kubernetes client logs and raises about it; None when it can be."""
    if not path.exists():
        return "no such file"
    if path.is_dir():
        return "is a directory, not a kubeconfig file"
    if not os.access(path, os.R_OK):
        return "permission denied"
    return None


async def connect(where: Settings, flag: str = "--kubeconfig") -> client.ApiClient:
    """An ``ApiClient`` for ``where``; a kubeconfig that is missing, unreadable or not a
    kubeconfig is an :class:`InvalidInput` of ``flag`` (``--kubeconfig`` or ``KUBECONFIG``)
    on one line: ``carbonshift: config: --kubeconfig: cannot load FILE: why``, exit status
    2. Nothing is sent to the API server."""
    configuration = client.Configuration()
    if where.kubeconfig is None:
        try:
            kube_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except kube_config.ConfigException as exc:
            raise InvalidInput("KUBERNETES_SERVICE_HOST", one_line(exc)) from None
        return client.ApiClient(configuration=configuration)
    problem = kubeconfig_problem(where.kubeconfig)
    if problem is None:
        try:
            await kube_config.load_kube_config(
                config_file=str(where.kubeconfig), client_configuration=configuration
            )
        except Exception as exc:  # YAML, ConfigException, a missing key: not a kubeconfig
            problem = f"not a usable kubeconfig: {one_line(exc) or type(exc).__name__}"
    if problem is not None:
        raise InvalidInput(flag, f"cannot load {where.kubeconfig}: {problem}")
    return client.ApiClient(configuration=configuration)


class Backoff:
    """Jittered exponential delays: ``base * 2**n``, capped, times a random 0.5..1.5."""

    def __init__(self, base: float = 0.5, cap: float = 30.0) -> None:
        self.base = base
        self.cap = cap
        self.attempt = 0

    def next(self) -> float:
        delay: float = min(self.cap, self.base * 2.0**self.attempt)
        self.attempt = min(self.attempt + 1, 30)
        jitter: float = random.uniform(0.5, 1.5)  # noqa: S311 - jitter, not a secret
        return delay * jitter

    def reset(self) -> None:
        self.attempt = 0

    async def sleep(self) -> None:
        await asyncio.sleep(self.next())


def error_name(exc: BaseException) -> str:
    """Short label for a failed call: the HTTP status, or the exception class."""
    if isinstance(exc, ApiException) and exc.status:
        return str(exc.status)
    return type(exc).__name__


_refused: set[tuple[str, str]] = set()


def refused(exc: BaseException, verb: str, resource: str) -> bool:
    """True (after one error log per verb and resource, and the metric) when ``exc`` is
    RBAC's 403: retrying will not help until someone grants the permission."""
    if not (isinstance(exc, ApiException) and exc.status == 403):
        return False
    metrics.KUBE_FORBIDDEN.labels(verb, resource).inc()
    if (verb, resource) not in _refused:
        _refused.add((verb, resource))
        log.error(
            "kube_forbidden",
            verb=verb,
            resource=resource,
            hint=f"grant carbonshift's service account '{verb}' on '{resource}' (RBAC)",
            reason=str(exc.reason),
        )
    return True


_absent: set[str] = set()


def absent(exc: BaseException, resource: str) -> bool:
    """True (after one info log per resource) when ``exc`` is the 404 of a *list*: the API
    server does not serve ``resource`` at all, e.g. a cluster with Karpenter but no
    Karmada. Nothing is wrong, there is simply none of it; callers look again later, in
    case its CRD is installed."""
    if not (isinstance(exc, ApiException) and exc.status == 404):
        return False
    if resource not in _absent:
        _absent.add(resource)
        log.info(
            "kube_resource_absent",
            resource=resource,
            hint="the API server does not serve it (its CRD is not installed); "
            "carbonshift treats it as empty and looks again now and then",
        )
    return True


async def list_objects(
    api: client.ApiClient, listed_resource: Resource, *, event: str
) -> list[dict[str, Any]] | None:
    """Every object of a custom resource, each with its ``apiVersion``; None when it
    cannot be listed now (the caller's next pass tries again). RBAC's 403 and a resource
    the API server does not serve are said once (:func:`refused`, :func:`absent`); any
    other failure is logged as ``event``, warning level."""
    group, version, plural = listed_resource.group, listed_resource.version, listed_resource.plural
    resource = listed_resource.name
    try:
        listed = await client.CustomObjectsApi(api).list_cluster_custom_object(
            group, version, plural, _request_timeout=REQUEST_TIMEOUT
        )
    except ApiException as exc:
        metrics.KUBE_ERRORS.labels(resource, error_name(exc)).inc()
        if not (refused(exc, "list", resource) or absent(exc, resource)):
            log.warning(event, resource=resource, error=error_name(exc))
        return None
    found = listed.get("items") if isinstance(listed, dict) else None
    out = [dict(o) for o in found if isinstance(o, dict)] if isinstance(found, list) else []
    for obj in out:
        obj.setdefault("apiVersion", listed_resource.api_version)
    return out


async def body(response: aiohttp.ClientResponse) -> bytes:
    """What a call made with ``_preload_content=False`` answered, as bytes (the connection
    released); an answer outside 2xx raises :class:`ApiException` with its status and
    text, as the client's own calls do."""
    try:
        data = await response.read()
        if not 200 <= response.status <= 299:
            raise ApiException(status=response.status, reason=data.decode(errors="replace"))
    finally:
        response.release()
    return data


class Outage:
    """Failures of one ongoing activity (a watch, the elector): one warning when it starts
    failing, one info line when it recovers, a metric for every failure."""

    def __init__(self, resource: str, what: str) -> None:
        self.resource = resource
        self.what = what
        self.failures = 0

    def failed(self, exc: BaseException, verb: str) -> None:
        metrics.KUBE_ERRORS.labels(self.resource, error_name(exc)).inc()
        self.failures += 1
        if refused(exc, verb, self.resource) or self.failures > 1:
            return
        log.warning(
            "kube_unreachable",
            activity=self.what,
            resource=self.resource,
            error=error_name(exc),
            detail=str(exc)[:300],
            hint="retrying with backoff; this is logged once per outage",
        )

    def recovered(self) -> None:
        if self.failures:
            log.info("kube_recovered", activity=self.what, failures=self.failures)
        self.failures = 0


async def pages(
    objects: client.CustomObjectsApi, group: str, version: str, plural: str, **options: Any
) -> AsyncIterator[list[Any]]:
    """Every object of a cluster-wide custom resource list, one page of :data:`LIST_PAGE`
    at a time (the API server's ``continue`` token between them), so a caller never holds
    them all; an :class:`ApiException` is the caller's."""
    token = ""
    while True:
        paging: dict[str, Any] = {"limit": LIST_PAGE} | ({"_continue": token} if token else {})
        listed = await objects.list_cluster_custom_object(
            group, version, plural, _request_timeout=REQUEST_TIMEOUT, **options, **paging
        )
        yield list(items(listed, "items"))
        token = text(listed, "metadata", "continue")
        if not token:
            return
