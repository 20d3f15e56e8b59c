"""The scheduler API's wire formats: Karmada filter/score requests and kube-scheduler's
ExtenderArgs, decoded and checked in one pass.

Every body is decoded and validated by msgspec structs (:mod:`webhook.model.validation`);
a problem raises :class:`~webhook.model.validation.InvalidInput` naming the field,
answered with 400 and ``{"error": "<field>: <problem>"}``. A malformed
``carbonshift.io/*`` value on the workload is not a malformed request: the knob is
ignored, named in a warning and counted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Annotated, ClassVar

import msgspec

from webhook.decision.clusters import Candidate, node_candidate
from webhook.model import validation, vocabulary
from webhook.model.objects import items, strings
from webhook.model.validation import GridZone, InvalidInput
from webhook.runtime.metrics import SCHEDULER_IGNORED_ANNOTATIONS

MAX_CANDIDATES = 10_000
"""Most clusters or nodes one request may carry."""
_MAX_NAME = 253


Name = Annotated[str, msgspec.Meta(min_length=1, max_length=_MAX_NAME)]
Annotations = dict[str, str]


def _unique(names: Sequence[str], where: str) -> None:
    if len(set(names)) != len(names):
        raise InvalidInput(where, "names must be unique")


def _limit(annotations: Annotations | None, where: str, api: str) -> tuple[float | None, list[str]]:
    """The workload's ``max-intensity`` and the warnings about it: a malformed value is
    ignored (no limit), named in a warning and counted, never a 400."""
    try:
        return vocabulary.limit_of(annotations), []
    except InvalidInput as exc:
        SCHEDULER_IGNORED_ANNOTATIONS.labels(api, vocabulary.MAX_INTENSITY).inc()
        return None, [f"{exc.within(where)}; ignored, answered without it"]


class KarmadaCluster(msgspec.Struct, frozen=True, gc=False):
    """One candidate cluster as Karmada describes it (every field but ``name`` optional)."""

    name: Name
    zone: GridZone | None = None
    """Grid zone named directly (wins over config and region table)."""
    provider: str | None = None
    region: str | None = None
    zones: list[str] | None = None
    labels: dict[str, str] | None = None
    cloud_zone: ClassVar[None] = None
    """Clusters span availability zones; only nodes have one."""


class Workload(msgspec.Struct, frozen=True, gc=False):
    """Optional facts about the workload being scheduled."""

    namespace: str | None = None
    name: str | None = None
    kind: str | None = None
    replicas: Annotated[int, msgspec.Meta(ge=0)] | None = None
    annotations: Annotations | None = None


class KarmadaBody(msgspec.Struct, frozen=True, gc=False):
    """A ``/v1/karmada/*`` body as sent (shape in ``webhook/data/openapi.json``)."""

    clusters: Annotated[list[KarmadaCluster], msgspec.Meta(max_length=MAX_CANDIDATES)]
    workload: Workload | None = None


_karmada_decoder = validation.decoder(KarmadaBody)


@dataclasses.dataclass(frozen=True, slots=True)
class KarmadaRequest:
    """A validated ``/v1/karmada/*`` request: its clusters and the workload's limit."""

    clusters: list[KarmadaCluster]
    limit: float | None
    """The workload's ``carbonshift.io/max-intensity`` in gCO2eq/kWh, None when absent."""
    warnings: list[str]
    """Annotations ignored because their value is malformed."""


def parse_karmada(raw: bytes) -> KarmadaRequest:
    """Decode and validate a Karmada filter/score request (types, lengths, zone keys,
    unique names, max-intensity); :class:`InvalidInput` names the offending field."""
    body = validation.decode(raw, _karmada_decoder)
    _unique([c.name for c in body.clusters], "clusters")
    annotations = body.workload.annotations if body.workload is not None else None
    limit, warnings = _limit(annotations, "workload.annotations", "karmada")
    return KarmadaRequest(body.clusters, limit, warnings)


class _Meta(msgspec.Struct, frozen=True, gc=False):
    name: Name | None = None
    labels: Annotations | None = None
    annotations: Annotations | None = None


class _PodMeta(msgspec.Struct, frozen=True, gc=False):
    annotations: Annotations | None = None


class _Pod(msgspec.Struct, frozen=True, gc=False):
    metadata: _PodMeta = _PodMeta()


class _NodeSpec(msgspec.Struct, frozen=True, gc=False):
    providerID: str | None = None  # noqa: N815 - the API's field name


class _Node(msgspec.Struct, frozen=True, gc=False):
    """What the extender reads of a Node; the node itself is echoed back as sent."""

    metadata: _Meta
    spec: _NodeSpec | None = None


class _NodeList(msgspec.Struct, frozen=True, gc=False):
    items: Annotated[list[msgspec.Raw], msgspec.Meta(max_length=MAX_CANDIDATES)] | None = None


class ExtenderArgs(
    msgspec.Struct,
    frozen=True,
    gc=False,
    rename={"pod": "Pod", "nodes": "Nodes", "node_names": "NodeNames"},
):
    """kube-scheduler's ExtenderArgs (Go field names as JSON keys)."""

    pod: _Pod | None = None
    nodes: _NodeList | None = None
    node_names: Annotated[list[Name], msgspec.Meta(max_length=MAX_CANDIDATES)] | None = None


_extender_decoder = validation.decoder(ExtenderArgs)
_node_decoder = validation.decoder(_Node)


@dataclasses.dataclass(frozen=True, slots=True)
class ExtenderRequest:
    """A parsed kube-scheduler ExtenderArgs."""

    candidates: list[Candidate]
    nodes: Sequence[msgspec.Raw] | None
    """The ``Nodes.items`` exactly as sent (echoed back by filter); None when NodeNames
    was sent."""
    limit: float | None


def parse_extender(raw: bytes) -> ExtenderRequest:
    """Decode and validate ExtenderArgs: ``{"Pod": ..., "Nodes": {"items": [...]}|null,
    "NodeNames": [...]}``; :class:`InvalidInput` names the offending field."""
    args = validation.decode(raw, _extender_decoder)
    pod = args.pod.metadata.annotations if args.pod is not None else None
    limit, _ = _limit(pod, "Pod.metadata.annotations", "extender")  # no room for warnings
    if args.nodes is not None:
        listed = items(args.nodes.items)
        candidates = []
        for i, item in enumerate(listed):
            node = validation.decode(item, _node_decoder, f"Nodes.items[{i}]")
            name = node.metadata.name
            if name is None:
                raise InvalidInput(f"Nodes.items[{i}].metadata", "missing required field name")
            provider_id = node.spec.providerID if node.spec is not None else None
            meta = node.metadata
            candidates.append(
                node_candidate(name, strings(meta.labels), provider_id, strings(meta.annotations))
            )
        _unique([c.name for c in candidates], "Nodes.items")
        return ExtenderRequest(candidates, listed, limit)
    names = items(args.node_names)
    _unique(names, "NodeNames")
    return ExtenderRequest([Candidate(name=n) for n in names], None, limit)
