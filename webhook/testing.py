"""Builders for tests of code that meets carbonshift: the objects it mutates and the
AdmissionReviews kube-apiserver sends it.

Like ``structlog.testing`` or ``kopf.testing``, this module is shipped for *your* tests
(a policy generator, an admission chain, a dashboard fed by the decision annotation) as
much as for carbonshift's own. It needs no test framework. Every builder takes its
options by keyword, has defaults that make a valid object, and returns a fresh plain
``dict`` (nothing shared between calls, so a test may change what it gets)::

    from webhook import testing

    policy = testing.propagation_policy(namespace="shop", strategy="weighted")
    body = json.dumps(testing.review(policy))  # POST it to /mutate
    ...
    stored = testing.stored(policy, answer)    # what the API server keeps

- :func:`review`: an ``admission.k8s.io/v1`` AdmissionReview for an object, its kind and
  resource taken from the kind registry (:mod:`webhook.kinds`);
- :func:`propagation_policy`, :func:`cluster_propagation_policy`: Karmada policies;
- :func:`nodepool`: a Karpenter NodePool;
- :func:`cluster`, :func:`resource_summary`: a Karmada member Cluster and its
  ``status.resourceSummary``;
- :func:`patch_of`, :func:`stored`: the JSON Patch of an AdmissionReview response and the
  object as the API server stores it after that response.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final, Literal, TypedDict, Unpack

import jsonpatch

from webhook import kinds
from webhook.model import vocabulary
from webhook.model.objects import mapping, meta_of

__all__ = [
    "DIVIDED",
    "UID",
    "Meta",
    "Operation",
    "PolicyOptions",
    "cluster",
    "cluster_propagation_policy",
    "nodepool",
    "patch_of",
    "propagation_policy",
    "resource_summary",
    "review",
    "stored",
]

Object = dict[str, Any]
Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]

UID: Final = "705ab4f5-6393-11e8-b7cc-42010a800002"
"""The ``request.uid`` :func:`review` uses unless told otherwise (fixed, so answers
compare byte for byte)."""

KARMADA_POLICY: Final = "policy.karmada.io/v1alpha1"
KARMADA_CLUSTER: Final = "cluster.karmada.io/v1alpha1"
KARPENTER: Final = "karpenter.sh/v1"

DIVIDED: Final[Mapping[str, Any]] = {"replicaScheduling": {"replicaSchedulingType": "Divided"}}
"""The placement a policy gets when none is given: replicas divided among clusters."""

_OPTIONS: Final[Mapping[str, str]] = {
    "CREATE": "CreateOptions",
    "UPDATE": "UpdateOptions",
    "DELETE": "DeleteOptions",
}


def review(
    obj: Mapping[str, Any] | None,
    *,
    operation: Operation = "CREATE",
    old: Mapping[str, Any] | None = None,
    namespace: str | None = None,
    uid: str = UID,
    dry_run: bool = False,
    resource: str | None = None,
    username: str = "kubernetes-admin",
    groups: Sequence[str] = ("system:masters", "system:authenticated"),
) -> Object:
    """An ``admission.k8s.io/v1`` AdmissionReview carrying ``obj`` as kube-apiserver sends
    it to a mutating webhook.

    The kind comes from ``obj`` (or ``old`` when ``obj`` is None, as on DELETE); its
    ``resource`` and whether it is namespaced from the kind registry
    (:func:`webhook.kinds.find`; a kind carbonshift does not handle gets the lower-case
    plural of its kind unless ``resource`` is given, and is namespaced when its metadata
    names a namespace). ``namespace`` defaults to the object's (``default`` when it names
    none) for namespaced kinds; cluster-scoped kinds carry none. Empty ``name`` and
    ``namespace`` are left out, as Go's ``omitempty`` leaves them out. The objects are
    deep copies: changing the review does not change ``obj``.
    """
    body = obj if obj is not None else old
    if body is None:
        raise ValueError("review needs an object, an old object or both")
    group, _, version = str(body.get("apiVersion", "")).rpartition("/")
    kind = str(body.get("kind", ""))
    row = kinds.find(group, kind)
    plural = resource or (row.resource if row is not None else kind.lower() + "s")
    namespaced = row.namespaced if row is not None else bool(meta_of(body).namespace)
    if namespace is None:
        namespace = (meta_of(body).namespace or "default") if namespaced else ""
    gvk = {"group": group, "version": version, "kind": kind}
    gvr = {"group": group, "version": version, "resource": plural}
    request: Object = {"uid": uid, "kind": gvk, "resource": gvr, "requestKind": dict(gvk)}
    request["requestResource"] = dict(gvr)
    if name := meta_of(body).name:
        request["name"] = name
    if namespace:
        request["namespace"] = namespace
    request["operation"] = operation
    request["userInfo"] = {"username": username, "groups": list(groups)}
    request["object"] = copy.deepcopy(dict(obj)) if obj is not None else None
    request["oldObject"] = copy.deepcopy(dict(old)) if old is not None else None
    request["dryRun"] = dry_run
    options = _OPTIONS.get(operation)
    request["options"] = {"kind": options, "apiVersion": "meta.k8s.io/v1"} if options else None
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


class Meta(TypedDict, total=False):
    """Options every object builder takes, for the object's ``metadata`` (None: unset)."""

    labels: Mapping[str, str] | None
    annotations: Mapping[str, str] | None
    enabled: bool | None
    """The ``carbonshift.io/enabled`` label: ``"true"`` or ``"false"`` (None: no label).
    Namespaced objects are managed unless opted out; cluster-scoped ones only with it."""
    strategy: str | None
    """The ``carbonshift.io/strategy`` annotation."""
    created: datetime | None
    """The ``creationTimestamp``."""
    uid: str | None
    """The ``uid`` the API server gave the stored object."""


class PolicyOptions(Meta, total=False):
    """Options of the Karmada policy builders, besides :class:`Meta`'s."""

    selectors: Sequence[Mapping[str, Any]] | None
    """``resourceSelectors`` (default: every Deployment of the policy's namespace)."""
    placement: Mapping[str, Any] | None
    """``spec.placement`` (default: :data:`DIVIDED`)."""
    clusters: Sequence[str] | None
    """Adds a ``clusterAffinity`` naming these clusters to the placement."""


def propagation_policy(
    name: str = "web", *, namespace: str = "default", **options: Unpack[PolicyOptions]
) -> Object:
    """A Karmada ``PropagationPolicy`` in ``namespace`` (options: :class:`PolicyOptions`)."""
    return _policy("PropagationPolicy", _metadata(name, namespace, options), options)


def cluster_propagation_policy(name: str = "web", **options: Unpack[PolicyOptions]) -> Object:
    """A Karmada ``ClusterPropagationPolicy``: :func:`propagation_policy` without a
    namespace. Cluster-scoped objects are managed only with ``enabled=True``."""
    return _policy("ClusterPropagationPolicy", _metadata(name, None, options), options)


def nodepool(
    name: str = "default",
    *,
    requirements: Sequence[Mapping[str, Any]] | None = None,
    node_class: Mapping[str, str] | None = None,
    limits: Mapping[str, Any] | None = None,
    weight: int | None = None,
    **meta: Unpack[Meta],
) -> Object:
    """A Karpenter ``NodePool`` (``karpenter.sh/v1``; metadata options: :class:`Meta`).

    ``requirements`` go to ``spec.template.spec.requirements`` (default: Linux nodes);
    ``node_class`` is its ``nodeClassRef`` (default: the ``default`` EC2NodeClass);
    ``limits`` and ``weight`` are set when given. NodePools are cluster-scoped:
    carbonshift manages one only with ``enabled=True``.
    """
    template: Object = {
        "nodeClassRef": dict(node_class or _EC2_NODE_CLASS),
        "requirements": _copies(requirements if requirements is not None else _LINUX),
    }
    spec: Object = {"template": {"spec": template}}
    if limits is not None:
        spec["limits"] = copy.deepcopy(dict(limits))
    if weight is not None:
        spec["weight"] = weight
    metadata = _metadata(name, None, meta)
    return {"apiVersion": KARPENTER, "kind": "NodePool", "metadata": metadata, "spec": spec}


def cluster(
    name: str,
    *,
    zone: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    provider: str | None = None,
    region: str | None = None,
    zones: Sequence[str] | None = None,
    sync_mode: str = "Push",
    ready: bool | None = None,
    summary: Mapping[str, Any] | None = None,
) -> Object:
    """A Karmada member ``Cluster``.

    ``zone`` is its grid zone as the ``carbonshift.io/zone`` label; ``provider``,
    ``region`` and ``zones`` its ``spec`` fields (carbonshift reads the grid zone from
    the region when no label names it); ``ready`` adds a ``Ready`` condition and
    ``summary`` the ``status.resourceSummary`` (see :func:`resource_summary`).
    """
    all_labels = {} if labels is None else dict(labels)
    if zone is not None:
        all_labels[vocabulary.ZONE] = zone
    meta: Object = {"name": name, "labels": all_labels}
    if annotations:
        meta["annotations"] = dict(annotations)
    spec: Object = {"syncMode": sync_mode}
    for key, value in (("provider", provider), ("region", region)):
        if value is not None:
            spec[key] = value
    if zones is not None:
        spec["zones"] = list(zones)
    obj: Object = {"apiVersion": KARMADA_CLUSTER, "kind": "Cluster", "metadata": meta}
    obj["spec"] = spec
    status: Object = {}
    if ready is not None:
        condition = {"type": "Ready", "status": "True" if ready else "False"}
        status["conditions"] = [condition | {"reason": "ClusterReady" if ready else "NotReady"}]
    if summary is not None:
        status["resourceSummary"] = copy.deepcopy(dict(summary))
    if status:
        obj["status"] = status
    return obj


def resource_summary(
    cpu: float,
    *,
    used: float = 0,
    memory: str = "256Gi",
    pods: int = 1000,
    allocating: float | None = None,
) -> Object:
    """A Cluster's ``status.resourceSummary``: ``cpu`` cores allocatable (with ``memory``
    and ``pods``), ``used`` of them allocated (and as many pods), ``allocating`` cores
    on their way when given."""
    out: Object = {
        "allocatable": {"cpu": _quantity(cpu), "memory": memory, "pods": str(pods)},
        "allocated": {"cpu": _quantity(used), "pods": _quantity(used)},
    }
    if allocating is not None:
        out["allocating"] = {"cpu": _quantity(allocating)}
    return out


def patch_of(answer: bytes | str | Mapping[str, Any]) -> list[Object]:
    """The JSON Patch an AdmissionReview response carries (``[]`` when it has none);
    ``answer`` is the response body as bytes, text or decoded."""
    body = json.loads(answer) if isinstance(answer, bytes | str) else answer
    encoded = mapping(body, "response").get("patch")
    patch: list[Object] = json.loads(base64.b64decode(encoded)) if encoded else []
    return patch


def stored(obj: Mapping[str, Any], answer: bytes | str | Mapping[str, Any]) -> Object:
    """``obj`` as the API server stores it after the AdmissionReview response ``answer``
    (its JSON Patch applied to a copy; ``obj`` itself is left alone)."""
    out: Object = jsonpatch.apply_patch(copy.deepcopy(dict(obj)), patch_of(answer))
    return out


# --- parts ---------------------------------------------------------------------------------

_EC2_NODE_CLASS: Final = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
_LINUX: Final = ({"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},)
_DEPLOYMENTS: Final = ({"apiVersion": "apps/v1", "kind": "Deployment"},)


def _metadata(name: str, namespace: str | None, meta: Meta) -> Object:
    out: Object = {"name": name}
    if namespace is not None:
        out["namespace"] = namespace
    if (uid := meta.get("uid")) is not None:
        out["uid"] = uid
    if (created := meta.get("created")) is not None:
        out["creationTimestamp"] = vocabulary.format_time(created)
    labels = dict(mapping(meta, "labels"))
    if (enabled := meta.get("enabled")) is not None:
        labels[vocabulary.ENABLED] = "true" if enabled else "false"
    annotations = dict(mapping(meta, "annotations"))
    if (strategy := meta.get("strategy")) is not None:
        annotations[vocabulary.STRATEGY] = strategy
    out["labels"] = labels
    out["annotations"] = annotations
    return out


def _policy(kind: str, meta: Object, options: PolicyOptions) -> Object:
    placement = options.get("placement")
    spread = copy.deepcopy(dict(placement if placement is not None else DIVIDED))
    if (clusters := options.get("clusters")) is not None:
        spread["clusterAffinity"] = {"clusterNames": list(clusters)}
    selectors = options.get("selectors")
    spec = {
        "resourceSelectors": _copies(selectors if selectors is not None else _DEPLOYMENTS),
        "placement": spread,
    }
    return {"apiVersion": KARMADA_POLICY, "kind": kind, "metadata": meta, "spec": spec}


def _copies(items: Sequence[Mapping[str, Any]]) -> list[Object]:
    return [copy.deepcopy(dict(item)) for item in items]


def _quantity(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)
