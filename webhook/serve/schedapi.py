"""Scheduler API: Karmada filter/score and the kube-scheduler extender, on the same server.

Routes (registered by :func:`add_routes`):

- ``POST /v1/karmada/filter`` and ``POST /v1/karmada/score``: candidate clusters as
  Karmada describes them plus optional workload facts; answered by the carbonshift
  Karmada scheduler plugin (``karmada-plugin/``).
- ``POST /v1/extender/filter`` and ``POST /v1/extender/prioritize``: kube-scheduler's
  extender protocol (ExtenderArgs in; ExtenderFilterResult / HostPriorityList out, Go
  field names as JSON keys, scores 0..10).
- ``GET /openapi.json``: the OpenAPI 3 document of these endpoints.

Handlers answer from memory only (:meth:`IntensityFeed.snapshot`); a zone without data is
registered with :meth:`IntensityFeed.want` for the background refresher and scored
neutral. Malformed requests get 400 with ``{"error": "<field>: <problem>"}``, never 500.
A malformed ``carbonshift.io/*`` annotation value on the workload is not a malformed
request: the knob is ignored, the rest answered, the Karmada answers carry a ``warnings``
entry naming it and ``carbonshift_scheduler_ignored_annotations_total`` counts it (a 400
would make the Karmada plugin let every cluster through).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from datetime import datetime
from importlib import resources
from typing import Annotated, Any, ClassVar

import msgspec
import orjson
from aiohttp import web

from webhook.decision.clusters import (
    Assessment,
    Candidate,
    Verdict,
    assess,
    cluster_zone,
    filter_by_limit,
    node_candidate,
    node_zone,
)
from webhook.model import validation, vocabulary
from webhook.model.intensity import utcnow
from webhook.model.validation import InvalidInput
from webhook.runtime.metrics import (
    SCHEDULER_IGNORED_ANNOTATIONS,
    SCHEDULER_REQUESTS,
    SCHEDULER_SECONDS,
)
from webhook.serve.state import STATE, ServerState

MAX_CANDIDATES = 10_000
"""Most clusters or nodes one request may carry."""
_MAX_NAME = 253
JSON = "application/json"

Handler = Callable[[web.Request], Awaitable[web.Response]]


# --- parsing -----------------------------------------------------------------------------
#
# Every body is decoded and validated in one pass by msgspec structs
# (:mod:`webhook.model.validation`); a problem raises InvalidInput naming the field, answered
# with 400 and ``{"error": "<field>: <problem>"}``.

Name = Annotated[str, msgspec.Meta(min_length=1, max_length=_MAX_NAME)]
ZoneKey = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")]
Annotations = dict[str, str]


def _unique(names: list[str], where: str) -> None:
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
    zone: ZoneKey | None = None
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
    nodes: list[msgspec.Raw] | None
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
        items = args.nodes.items or []
        candidates = []
        for i, item in enumerate(items):
            node = validation.decode(item, _node_decoder, f"Nodes.items[{i}]")
            name = node.metadata.name
            if name is None:
                raise InvalidInput(f"Nodes.items[{i}].metadata", "missing required field name")
            provider_id = node.spec.providerID if node.spec is not None else None
            meta = node.metadata
            candidates.append(
                node_candidate(name, meta.labels or {}, provider_id, meta.annotations)
            )
        _unique([c.name for c in candidates], "Nodes.items")
        return ExtenderRequest(candidates, items, limit)
    names = args.node_names or []
    _unique(names, "NodeNames")
    return ExtenderRequest([Candidate(name=n) for n in names], None, limit)


# --- answers -----------------------------------------------------------------------------


def _assess_clusters(state: ServerState, req: KarmadaRequest) -> list[Assessment]:
    """Zone order per candidate: the request's ``zone``, the member cluster carbonshift
    knows by that name (fleet inventory, else config ``clusters:``), then the request's
    provider + region through the region table."""
    known = state.clusters()
    config = state.config
    if known is not config.clusters:  # the inventory's view of the fleet
        config = msgspec.structs.replace(config, clusters=known)
    resolve = functools.partial(cluster_zone, config=config)
    lookup = state.feed.snapshot().table.get
    return assess(req.clusters, resolve, lookup, state.feed.want, named=known)


def _assess_nodes(state: ServerState, req: ExtenderRequest) -> list[Assessment]:
    """A local node without zone facts of its own is in the local cluster's zone; a Liqo
    virtual node in its remote cluster's (configured by cluster id, hence ``named``)."""
    local = state.nodes.current.zone if state.nodes is not None else None
    resolve = functools.partial(node_zone, config=state.config, local=local or state.config.zone)
    peers = {c.name for c in req.candidates if c.peer is not None}
    lookup = state.feed.snapshot().table.get
    return assess(req.candidates, resolve, lookup, state.feed.want, named=peers)


def karmada_filter(state: ServerState, raw: bytes) -> bytes:
    """``{"clusters": [kept...], "filtered": [{"name", "reason"}...]}`` (+ ``warnings``)."""
    req = parse_karmada(raw)
    verdict = filter_by_limit(_assess_clusters(state, req), req.limit)
    out: dict[str, Any] = {
        "clusters": verdict.kept,
        "filtered": [{"name": n, "reason": r} for n, r in verdict.removed],
    }
    if req.warnings or verdict.warnings:
        out["warnings"] = [*req.warnings, *verdict.warnings]
    return orjson.dumps(out)


class ClusterScore(msgspec.Struct, gc=False, omit_defaults=True, rename="camel"):
    """One entry of a score answer; ``reason`` only when the verdict is uncertain."""

    name: str
    score: int
    intensity: float | None
    zone: str | None
    source: str | None
    data_age_seconds: int | None
    reason: str | None = None


class ScoreAnswer(msgspec.Struct, gc=False, omit_defaults=True):
    """``{"scores": [...]}``, request order; ``warnings`` only when there are some."""

    scores: list[ClusterScore]
    warnings: list[str] | None = None


_encode = msgspec.json.Encoder().encode


def karmada_score(state: ServerState, raw: bytes) -> bytes:
    """``{"scores": [{"name", "score", "intensity", "zone", "source", "dataAgeSeconds"}...]}``."""
    req = parse_karmada(raw)
    now = utcnow()
    facts: dict[int, tuple[Any, ...]] = {}  # per shared Verdict: the fields after the name
    scores = []
    for name, v in _assess_clusters(state, req):
        shared = facts.get(id(v))
        if shared is None:
            shared = facts[id(v)] = _score_facts(v, now)
        scores.append(ClusterScore(name, *shared))
    return _encode(ScoreAnswer(scores, req.warnings or None))


def _score_facts(v: Verdict, now: datetime) -> tuple[Any, ...]:
    """:class:`ClusterScore`'s fields after ``name``, in order."""
    source = v.reading.source if v.reading is not None else None
    return v.score, v.intensity, v.zone, source, v.data_age(now), v.reason


def extender_filter(state: ServerState, raw: bytes) -> bytes:
    """ExtenderFilterResult; removed nodes go to FailedAndUnresolvableNodes."""
    req = parse_extender(raw)
    verdict = filter_by_limit(_assess_nodes(state, req), req.limit)
    kept = set(verdict.kept)
    nodes = None
    if req.nodes is not None:
        items = [n for c, n in zip(req.candidates, req.nodes, strict=True) if c.name in kept]
        nodes = {"metadata": {}, "items": items}
    return _encode(
        {
            "Nodes": nodes,
            "NodeNames": verdict.kept if req.nodes is None else None,
            "FailedNodes": {},
            "FailedAndUnresolvableNodes": dict(verdict.removed),
            "Error": "",
        }
    )


def extender_prioritize(state: ServerState, raw: bytes) -> bytes:
    """HostPriorityList: ``[{"Host": node, "Score": 0..10}...]``, greener higher."""
    req = parse_extender(raw)
    assessed = _assess_nodes(state, req)
    return orjson.dumps([{"Host": name, "Score": v.extender_score} for name, v in assessed])


# --- HTTP --------------------------------------------------------------------------------


def _json(body: bytes, status: int = 200) -> web.Response:
    return web.Response(body=body, status=status, content_type=JSON)


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector for one synchronous answer.

    A request for 1000 clusters allocates some 10,000 short-lived, acyclic objects:
    enough to trigger a dozen collections that promote and rescan them while they are
    still alive. Reference counting frees all of them when the answer is built, so the
    cycle collector has nothing to find; pausing it removes tens of milliseconds of tail
    latency. Nothing else runs meanwhile (no await inside).
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


Answer = Callable[[ServerState, bytes], bytes]
"""Request body in, JSON answer out; raises :class:`~webhook.model.validation.InvalidInput`."""


def _endpoint(name: str, answer: Answer) -> Handler:
    """Wrap a pure answer function: parse, time, count, map InvalidInput to 400."""
    requests_ok = SCHEDULER_REQUESTS.labels(name, "ok")
    requests_bad = SCHEDULER_REQUESTS.labels(name, "bad_request")
    seconds = SCHEDULER_SECONDS.labels(name)

    async def handler(request: web.Request) -> web.Response:
        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge as exc:
            requests_bad.inc()
            return _json(validation.error_body(exc.text or "body too large"), status=413)
        start = time.perf_counter()  # server time: from the whole body to the answer
        try:
            with paused_gc():
                response = _json(answer(request.app[STATE], raw))
        except InvalidInput as exc:
            requests_bad.inc()
            return _json(validation.error_body(exc), status=400)
        seconds.observe(time.perf_counter() - start)
        requests_ok.inc()
        return response

    handler.__name__ = f"schedapi_{name.replace('/', '_')}"
    handler.__doc__ = answer.__doc__
    return handler


@functools.cache
def openapi_document() -> bytes:
    """The OpenAPI 3 document shipped as ``webhook/data/openapi.json``."""
    return resources.files("webhook").joinpath("data/openapi.json").read_bytes()


async def openapi(_request: web.Request) -> web.Response:
    """GET /openapi.json."""
    return web.Response(body=openapi_document(), content_type=JSON)


ROUTES: Mapping[str, Answer] = {
    "/v1/karmada/filter": karmada_filter,
    "/v1/karmada/score": karmada_score,
    "/v1/extender/filter": extender_filter,
    "/v1/extender/prioritize": extender_prioritize,
}


def add_routes(app: web.Application) -> None:
    """Register the scheduler endpoints and ``GET /openapi.json`` on ``app``.

    Handlers read ``app[STATE]``; the server sets it before serving.
    """
    for path, answer in ROUTES.items():
        app.router.add_post(path, _endpoint(path.removeprefix("/v1/"), answer))
    app.router.add_get("/openapi.json", openapi)
