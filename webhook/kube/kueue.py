"""Kueue's objects on the MultiKueue manager, and clients for its worker clusters.

The manager's objects are read through the process's ``ApiClient`` (:func:`get`,
:func:`listed`). A worker is reached the way Kueue reaches it: the ``MultiKueueCluster``
names a kubeconfig (``spec.clusterSource.kubeConfig``, ``locationType: Secret``: the key
``kubeconfig`` of the Secret ``location`` in Kueue's namespace, ``kueue.namespace``).
:class:`Workers` keeps one ``ApiClient`` per worker, rebuilt when the Secret changes and
closed by :meth:`Workers.close` (the application manager calls it after the controllers
stopped). A worker that cannot be read is None: the callers skip it this pass.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import structlog
import yaml
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.rest import ApiException

from webhook.kube.client import FIELD_MANAGER, REQUEST_TIMEOUT, error_name, refused
from webhook.kube.writes import Gate, NotLeader, apply_options
from webhook.model.objects import dig, items, meta_of, text
from webhook.model.resources import Resource
from webhook.model.vocabulary import format_time
from webhook.runtime import metrics

log = structlog.get_logger("carbonshift.kueue")

GROUP = "kueue.x-k8s.io"
VERSION = "v1beta2"
API_VERSION = f"{GROUP}/{VERSION}"
WORKLOAD = Resource(GROUP, VERSION, "workloads", "Workload")
CLUSTER_QUEUE = Resource(GROUP, VERSION, "clusterqueues", "ClusterQueue")
LOCAL_QUEUE = Resource(GROUP, VERSION, "localqueues", "LocalQueue")
ADMISSION_CHECK = Resource(GROUP, VERSION, "admissionchecks", "AdmissionCheck")
MULTIKUEUE_CONFIG = Resource(GROUP, VERSION, "multikueueconfigs", "MultiKueueConfig")
MULTIKUEUE_CLUSTER = Resource(GROUP, VERSION, "multikueueclusters", "MultiKueueCluster")
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
"""The ``controllerName`` of MultiKueue's own AdmissionCheck."""
KUBECONFIG_KEY = "kubeconfig"
"""The Secret key Kueue reads a worker's kubeconfig from."""

Obj = dict[str, Any]


async def get(
    api: client.ApiClient, resource: Resource, name: str, namespace: str | None = None
) -> Obj | None:
    """One Kueue object (None: absent, refused or unreachable; logged once per cause)."""
    objects = client.CustomObjectsApi(api)
    try:
        if namespace:
            found = await objects.get_namespaced_custom_object(
                resource.group,
                resource.version,
                namespace,
                resource.plural,
                name,
                _request_timeout=REQUEST_TIMEOUT,
            )
        else:
            found = await objects.get_cluster_custom_object(
                resource.group,
                resource.version,
                resource.plural,
                name,
                _request_timeout=REQUEST_TIMEOUT,
            )
    except ApiException as exc:
        if exc.status != 404:
            _failed(exc, "get", resource)
        return None
    except Exception as exc:  # a worker that does not answer
        _failed(exc, "get", resource)
        return None
    out: Obj = dict(found)
    out.setdefault("apiVersion", resource.api_version)
    return out


def _failed(exc: BaseException, verb: str, resource: Resource) -> None:
    name = resource.name
    metrics.KUBE_ERRORS.labels(name, error_name(exc)).inc()
    if not refused(exc, verb, name):
        log.warning("kueue_read_failed", verb=verb, resource=name, error=error_name(exc))


def kubeconfig_secret(cluster: Mapping[str, Any]) -> str | None:
    """The Secret a MultiKueueCluster's kubeconfig is in (None: not a Secret, e.g. a
    ``Path`` on Kueue's own file system, which carbonshift cannot read)."""
    source = ("spec", "clusterSource", "kubeConfig")
    if text(cluster, *source, "locationType") not in ("", "Secret"):
        return None
    return text(cluster, *source, "location") or None


def kubeconfig_of(secret: Mapping[str, Any]) -> dict[str, Any] | None:
    """The kubeconfig in a Secret's ``data.kubeconfig`` (None: missing or unreadable)."""
    data = secret.get("data")
    raw = data.get(KUBECONFIG_KEY) if isinstance(data, Mapping) else None
    if not isinstance(raw, str):
        return None
    try:
        document = yaml.safe_load(base64.b64decode(raw, validate=True))
    except (binascii.Error, ValueError, yaml.YAMLError):
        return None
    return document if isinstance(document, dict) else None


class Workers:
    """One ``ApiClient`` per MultiKueue worker, from its kubeconfig Secret."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.api = api
        self.core = client.CoreV1Api(api)
        self.namespace = namespace
        self._clients: dict[str, tuple[str, client.ApiClient]] = {}
        """Worker -> (the Secret's resourceVersion, its client)."""
        self._said: set[tuple[str, str]] = set()

    async def client(self, cluster: Mapping[str, Any]) -> client.ApiClient | None:
        """The client of the worker a MultiKueueCluster names (None: its kubeconfig cannot
        be read now; said once per worker and cause)."""
        name = meta_of(cluster).name
        secret_name = kubeconfig_secret(cluster)
        if secret_name is None:
            self._unusable(name, "its kubeconfig is not in a Secret")
            return None
        try:
            secret = await self.core.read_namespaced_secret(
                secret_name, self.namespace, _request_timeout=REQUEST_TIMEOUT
            )
        except Exception as exc:
            metrics.KUBE_ERRORS.labels("secrets", error_name(exc)).inc()
            if not refused(exc, "get", "secrets"):
                self._unusable(name, f"Secret {self.namespace}/{secret_name}: {error_name(exc)}")
            return None
        raw: Obj = self.api.sanitize_for_serialization(secret)
        version = meta_of(raw).resource_version or ""
        held = self._clients.get(name)
        if held is not None and held[0] == version:
            return held[1]
        document = kubeconfig_of(raw)
        if document is None:
            self._unusable(name, f"no kubeconfig in Secret {self.namespace}/{secret_name}")
            return None
        configuration = client.Configuration()
        try:
            await config.load_kube_config_from_dict(document, client_configuration=configuration)
        except Exception as exc:
            self._unusable(name, f"its kubeconfig does not load: {exc}"[:300])
            return None
        if held is not None:
            await held[1].close()
        fresh = client.ApiClient(configuration=configuration)
        self._clients[name] = (version, fresh)
        self._said = {s for s in self._said if s[0] != name}
        return fresh

    def _unusable(self, name: str, why: str) -> None:
        if (name, why) not in self._said:
            self._said.add((name, why))
            log.warning("kueue_worker_unreadable", worker=name, problem=why)

    async def close(self) -> None:
        """Close every worker's client."""
        held, self._clients = self._clients, {}
        for _, api in held.values():
            await api.close()


# --- writes (the leader only: each checks the gate right before it is sent) ---------------

ADMISSION_MANAGER = "kueue-admission"
"""The field manager an external dispatcher must write ``nominatedClusterNames`` with
(Kueue's CHANGELOG-0.13): Kueue applies the admission status with it, so Kueue's own
apply that sets ``clusterName`` clears the nomination."""
ADMISSION_CONDITIONS = (
    "QuotaReserved", "BlockedOnPreemptionGates", "Evicted", "Admitted", "Preempted",
    "Requeued", "DeactivationTarget", "Finished",
)  # fmt: skip
"""The conditions Kueue's admission status apply carries (``pkg/workload/patching``)."""
_ADMISSION_FIELDS = (
    "admission", "requeueState", "accumulatedPastExecutionTimeSeconds", "clusterName",
    "unhealthyNodes", "preemptionGates", "admissionChecks",
)  # fmt: skip


def admission_status(workload: Mapping[str, Any], nominated: Sequence[str]) -> Obj:
    """The admission status apply Kueue itself sends (``PatchAdmissionStatus``): the fields
    ``kueue-admission`` owns, as read, with ``nominatedClusterNames`` set. Sending them all
    keeps Kueue's ownership of each as it is (an apply drops what its manager stops
    sending)."""
    status = workload.get("status")
    status = status if isinstance(status, Mapping) else {}
    out: Obj = {k: status[k] for k in _ADMISSION_FIELDS if status.get(k) is not None}
    if status.get("admission") is not None:
        out["resourceRequests"] = []
    elif status.get("resourceRequests") is not None:
        out["resourceRequests"] = status["resourceRequests"]
    out["conditions"] = [
        c for c in items(workload, "status", "conditions")
        if isinstance(c, Mapping) and c.get("type") in ADMISSION_CONDITIONS
    ]  # fmt: skip
    evictions = dig(workload, "status", "schedulingStats", "evictions")
    if evictions:
        out["schedulingStats"] = {"evictions": evictions}
    out["nominatedClusterNames"] = list(nominated)
    return out


def _status_body(obj: Mapping[str, Any], resource: Resource, status: Obj) -> Obj:
    meta = meta_of(obj)
    metadata: Obj = {"name": meta.name, "resourceVersion": meta.resource_version}
    if meta.namespace:
        metadata["namespace"] = meta.namespace
    return {
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "metadata": metadata,
        "status": status,
    }


async def apply_status(
    api: client.ApiClient,
    gate: Gate | None,
    obj: Mapping[str, Any],
    resource: Resource,
    *,
    status: Obj,
    manager: str = FIELD_MANAGER,
) -> Obj:
    """Server-side apply of ``status`` on a Kueue object (forced, as ``manager``), guarded by
    the ``resourceVersion`` read with ``obj`` (409 when it changed since). Raises
    :class:`~webhook.kube.writes.NotLeader` when this replica does not lead, and the API
    server's refusal (a 403 said once)."""
    meta = meta_of(obj)
    objects = client.CustomObjectsApi(api)
    options = {**apply_options(), "field_manager": manager}
    body = _status_body(obj, resource, status)
    if gate is not None and not gate.leading:
        raise NotLeader("not the leader: carbonshift writes only from the leading replica")
    try:
        if meta.namespace:
            result = await objects.patch_namespaced_custom_object_status(
                resource.group,
                resource.version,
                meta.namespace,
                resource.plural,
                meta.name,
                body,
                **options,
            )
        else:
            result = await objects.patch_cluster_custom_object_status(
                resource.group, resource.version, resource.plural, meta.name, body, **options
            )
    except ApiException as exc:
        if exc.status == 409:
            metrics.KUBE_CONFLICTS.labels(resource.name).inc()
        refused(exc, "patch", f"{resource.plural}/status.{resource.group}")
        raise
    out: Obj = dict(result) if isinstance(result, Mapping) else {}
    return out


def check_state(
    name: str, state: str, message: str, now: datetime, previous: Mapping[str, Any] | None
) -> Obj:
    """One ``status.admissionChecks`` entry (``lastTransitionTime`` moves with the state)."""
    moved = previous is None or previous.get("state") != state
    since = previous.get("lastTransitionTime") if previous is not None and not moved else None
    return {
        "name": name,
        "state": state,
        "message": message[:32768],
        "lastTransitionTime": since or format_time(now),
    }


def active_condition(message: str, now: datetime, generation: int | None) -> Obj:
    """The ``Active`` condition an AdmissionCheck's controller keeps True."""
    found: Obj = {
        "type": "Active", "status": "True", "reason": "Active", "message": message,
        "lastTransitionTime": format_time(now),
    }  # fmt: skip
    if generation is not None:
        found["observedGeneration"] = generation
    return found
