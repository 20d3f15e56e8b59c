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
neutral. Malformed requests get 400 with a JSON ``reason``, never 500.
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

from webhook import vocabulary
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
from webhook.intensity import utcnow
from webhook.metrics import SCHEDULER_REQUESTS, SCHEDULER_SECONDS
from webhook.state import STATE, ServerState

MAX_CANDIDATES = 10_000
"""Most clusters or nodes one request may carry."""
_MAX_NAME = 253
JSON = "application/json"

Handler = Callable[[web.Request], Awaitable[web.Response]]


class BadRequest(ValueError):
    """The request body is malformed; the message is the reason sent back with 400."""


# --- parsing -----------------------------------------------------------------------------


def _loads(raw: bytes) -> object:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"body is not valid JSON: {exc}") from None


def _object(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BadRequest(f"{where} must be an object")
    return value


def _optional_object(value: object, where: str) -> dict[str, Any]:
    return {} if value is None else _object(value, where)


def _string(value: object, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadRequest(f"{where} must be a string")
    return value or None


def _string_map(value: object, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise BadRequest(f"{where} must be an object of strings")
    return value


def _string_list(value: object, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BadRequest(f"{where} must be a list of strings")
    return value


def _name(value: object, where: str) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= _MAX_NAME:
        raise BadRequest(f"{where} must be a non-empty string of at most {_MAX_NAME} characters")
    return value


def _bounded(items: list[Any], where: str) -> list[Any]:
    if len(items) > MAX_CANDIDATES:
        raise BadRequest(f"{where} holds {len(items)} entries; at most {MAX_CANDIDATES}")
    return items


def _unique(names: list[str], where: str) -> None:
    if len(set(names)) != len(names):
        raise BadRequest(f"{where}: names must be unique")


def _limit(annotations: Mapping[str, str], where: str) -> float | None:
    try:
        return vocabulary.limit_of(annotations)
    except ValueError as exc:
        raise BadRequest(f"{where}: {exc}") from None


Name = Annotated[str, msgspec.Meta(min_length=1, max_length=_MAX_NAME)]
ZoneKey = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")]


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
    annotations: dict[str, str] | None = None


class KarmadaBody(msgspec.Struct, frozen=True, gc=False):
    """A ``/v1/karmada/*`` body as sent (shape in ``webhook/data/openapi.json``)."""

    clusters: Annotated[list[KarmadaCluster], msgspec.Meta(max_length=MAX_CANDIDATES)]
    workload: Workload | None = None


_karmada_decoder = msgspec.json.Decoder(KarmadaBody)


@dataclasses.dataclass(frozen=True, slots=True)
class KarmadaRequest:
    """A validated ``/v1/karmada/*`` request: its clusters and the workload's limit."""

    clusters: list[KarmadaCluster]
    limit: float | None
    """The workload's ``carbonshift.io/max-intensity`` in gCO2eq/kWh, None when absent."""


def parse_karmada(raw: bytes) -> KarmadaRequest:
    """Decode and validate a Karmada filter/score request (types, lengths, zone keys,
    unique names, max-intensity); :class:`BadRequest` names the offending field."""
    try:
        body = _karmada_decoder.decode(raw)
    except msgspec.ValidationError as exc:
        raise BadRequest(str(exc)) from None
    except msgspec.DecodeError as exc:
        raise BadRequest(f"body is not valid JSON: {exc}") from None
    _unique([c.name for c in body.clusters], "clusters")
    annotations = body.workload.annotations if body.workload is not None else None
    return KarmadaRequest(body.clusters, _limit(annotations or {}, "workload.annotations"))


@dataclasses.dataclass(frozen=True, slots=True)
class ExtenderRequest:
    """A parsed kube-scheduler ExtenderArgs."""

    candidates: list[Candidate]
    nodes: list[dict[str, Any]] | None
    """The ``Nodes.items`` as sent (echoed back by filter); None when NodeNames was sent."""
    limit: float | None


def parse_extender(body: object) -> ExtenderRequest:
    """Validate ExtenderArgs: ``{"Pod": ..., "Nodes": {"items": [...]}|null, "NodeNames": ...}``."""
    top = _object(body, "body")
    pod = _optional_object(top.get("Pod"), "Pod")
    meta = _optional_object(pod.get("metadata"), "Pod.metadata")
    limit = _limit(
        _string_map(meta.get("annotations"), "Pod.metadata.annotations"),
        "Pod.metadata.annotations",
    )
    nodes = top.get("Nodes")
    if nodes is not None:
        items = _optional_object(nodes, "Nodes").get("items")
        items = [] if items is None else items
        if not isinstance(items, list):
            raise BadRequest("Nodes.items must be a list")
        candidates = []
        for i, item in enumerate(_bounded(items, "Nodes.items")):
            where = f"Nodes.items[{i}]"
            node = _object(item, where)
            node_meta = _object(node.get("metadata"), f"{where}.metadata")
            spec = _optional_object(node.get("spec"), f"{where}.spec")
            candidates.append(
                node_candidate(
                    _name(node_meta.get("name"), f"{where}.metadata.name"),
                    _string_map(node_meta.get("labels"), f"{where}.metadata.labels"),
                    _string(spec.get("providerID"), f"{where}.spec.providerID"),
                )
            )
        _unique([c.name for c in candidates], "Nodes.items")
        return ExtenderRequest(candidates, items, limit)
    names = _bounded(_string_list(top.get("NodeNames"), "NodeNames"), "NodeNames")
    for i, name in enumerate(names):
        _name(name, f"NodeNames[{i}]")
    _unique(names, "NodeNames")
    return ExtenderRequest([Candidate(name=n) for n in names], None, limit)


# --- answers -----------------------------------------------------------------------------


def _assess_clusters(state: ServerState, req: KarmadaRequest) -> list[Assessment]:
    config = state.config
    resolve = functools.partial(cluster_zone, config=config)
    lookup = state.feed.snapshot().table.get
    return assess(req.clusters, resolve, lookup, state.feed.want, named=config.clusters)


def _assess_nodes(state: ServerState, req: ExtenderRequest) -> list[Assessment]:
    resolve = functools.partial(node_zone, config=state.config)
    return assess(req.candidates, resolve, state.feed.snapshot().table.get, state.feed.want)


def karmada_filter(state: ServerState, raw: bytes) -> bytes:
    """``{"clusters": [kept...], "filtered": [{"name", "reason"}...]}`` (+ ``warnings``)."""
    req = parse_karmada(raw)
    verdict = filter_by_limit(_assess_clusters(state, req), req.limit)
    out: dict[str, Any] = {
        "clusters": verdict.kept,
        "filtered": [{"name": n, "reason": r} for n, r in verdict.removed],
    }
    if verdict.warnings:
        out["warnings"] = verdict.warnings
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


class ScoreAnswer(msgspec.Struct, gc=False):
    """``{"scores": [...]}``, request order."""

    scores: list[ClusterScore]


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
    return _encode(ScoreAnswer(scores))


def _score_facts(v: Verdict, now: datetime) -> tuple[Any, ...]:
    """:class:`ClusterScore`'s fields after ``name``, in order."""
    source = v.reading.source if v.reading is not None else None
    return v.score, v.intensity, v.zone, source, v.data_age(now), v.reason


def extender_filter(state: ServerState, raw: bytes) -> bytes:
    """ExtenderFilterResult; removed nodes go to FailedAndUnresolvableNodes."""
    req = parse_extender(_loads(raw))
    verdict = filter_by_limit(_assess_nodes(state, req), req.limit)
    kept = set(verdict.kept)
    nodes = None
    if req.nodes is not None:
        nodes = {
            "metadata": {},
            "items": [n for n in req.nodes if n["metadata"]["name"] in kept],
        }
    return orjson.dumps(
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
    req = parse_extender(_loads(raw))
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
"""Request body in, JSON answer out; raises :class:`BadRequest`."""


def _endpoint(name: str, answer: Answer) -> Handler:
    """Wrap a pure answer function: parse, time, count, map BadRequest to 400."""
    requests_ok = SCHEDULER_REQUESTS.labels(name, "ok")
    requests_bad = SCHEDULER_REQUESTS.labels(name, "bad_request")
    seconds = SCHEDULER_SECONDS.labels(name)

    async def handler(request: web.Request) -> web.Response:
        raw = await request.read()
        start = time.perf_counter()  # server time: from the whole body to the answer
        try:
            with paused_gc():
                response = _json(answer(request.app[STATE], raw))
        except BadRequest as exc:
            requests_bad.inc()
            return _json(orjson.dumps({"reason": str(exc)}), status=400)
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
