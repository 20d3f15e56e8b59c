"""Scheduler API: Karmada filter/score and the kube-scheduler extender, on the same server.

Routes (registered by :func:`add_routes`):

- ``POST /v1/karmada/filter`` and ``POST /v1/karmada/score``: candidate clusters as
  Karmada describes them plus optional workload facts; answered by the carbonshift
  Karmada scheduler plugin (``karmada-plugin/``).
- ``POST /v1/extender/filter`` and ``POST /v1/extender/prioritize``: kube-scheduler's
  extender protocol (ExtenderArgs in; ExtenderFilterResult / HostPriorityList out, Go
  field names as JSON keys, scores 0..10).
- ``GET /openapi.json``: the OpenAPI 3 document of these endpoints.

Handlers answer from memory only (:meth:`IntensityFeed.get`); a zone without data is
registered with :meth:`IntensityFeed.want` for the background refresher and scored
neutral. Malformed requests get 400 with a JSON ``reason``, never 500.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import re
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from datetime import datetime
from importlib import resources
from typing import Any

import orjson
from aiohttp import web

from webhook.decision.clusters import (
    Assessment,
    Candidate,
    assess,
    cluster_zone,
    filter_by_limit,
    node_candidate,
    node_zone,
    parse_limit,
)
from webhook.intensity import utcnow
from webhook.metrics import SCHEDULER_REQUESTS, SCHEDULER_SECONDS
from webhook.state import STATE, ServerState

MAX_CANDIDATES = 10_000
"""Most clusters or nodes one request may carry."""
_ZONE_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
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


def _bad_name(where: str) -> BadRequest:
    return BadRequest(f"{where} must be a non-empty string of at most {_MAX_NAME} characters")


def _name(value: object, where: str) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= _MAX_NAME:
        raise _bad_name(where)
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
        return parse_limit(annotations)
    except ValueError as exc:
        raise BadRequest(f"{where}: {exc}") from None


_new_candidate = tuple.__new__
"""Builds a :class:`Candidate` without the named tuple's Python-level ``__new__``."""


def _cluster(item: object, i: int) -> Candidate:
    """One entry of ``clusters``; the common case (strings or absent) is checked inline."""
    if type(item) is not dict:
        raise BadRequest(f"clusters[{i}] must be an object")
    get = item.get
    name, zone, provider, region = get("name"), get("zone"), get("provider"), get("region")
    if type(name) is not str or not 0 < len(name) <= _MAX_NAME:
        raise _bad_name(f"clusters[{i}].name")
    if zone is not None and (type(zone) is not str or not _ZONE_KEY.match(zone)):
        raise BadRequest(f"clusters[{i}].zone must be a grid zone key such as FR or US-CAL-CISO")
    if provider is not None and type(provider) is not str:
        _string(provider, f"clusters[{i}].provider")
    if region is not None and type(region) is not str:
        _string(region, f"clusters[{i}].region")
    zones, labels = get("zones"), get("labels")
    if zones is not None and (
        type(zones) is not list or (zones and set(map(type, zones)) != {str})
    ):
        raise BadRequest(f"clusters[{i}].zones must be a list of strings")
    if labels is not None and (
        type(labels) is not dict or (labels and set(map(type, labels.values())) != {str})
    ):
        raise BadRequest(f"clusters[{i}].labels must be an object of strings")
    return _new_candidate(Candidate, (name, zone or None, provider or None, region or None, None))


@dataclasses.dataclass(frozen=True, slots=True)
class KarmadaRequest:
    """A parsed ``/v1/karmada/*`` body."""

    clusters: list[Candidate]
    limit: float | None


def parse_karmada(body: object) -> KarmadaRequest:
    """Validate a Karmada filter/score request (shape in ``webhook/data/openapi.json``)."""
    top = _object(body, "body")
    raw = top.get("clusters")
    if not isinstance(raw, list):
        raise BadRequest("clusters must be a list")
    clusters = [_cluster(item, i) for i, item in enumerate(_bounded(raw, "clusters"))]
    _unique([c.name for c in clusters], "clusters")
    workload = _optional_object(top.get("workload"), "workload")
    for key in ("namespace", "name", "kind"):
        _string(workload.get(key), f"workload.{key}")
    replicas = workload.get("replicas")
    if replicas is not None and (
        isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0
    ):
        raise BadRequest("workload.replicas must be an integer >= 0")
    annotations = _string_map(workload.get("annotations"), "workload.annotations")
    return KarmadaRequest(clusters, _limit(annotations, "workload.annotations"))


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
    return assess(req.clusters, resolve, state.feed.get, state.feed.want, named=config.clusters)


def _assess_nodes(state: ServerState, req: ExtenderRequest) -> list[Assessment]:
    resolve = functools.partial(node_zone, config=state.config)
    return assess(req.candidates, resolve, state.feed.get, state.feed.want)


def karmada_filter(state: ServerState, body: object) -> dict[str, Any]:
    """``{"clusters": [kept...], "filtered": [{"name", "reason"}...]}`` (+ ``warnings``)."""
    req = parse_karmada(body)
    verdict = filter_by_limit(_assess_clusters(state, req), req.limit)
    out: dict[str, Any] = {
        "clusters": verdict.kept,
        "filtered": [{"name": n, "reason": r} for n, r in verdict.removed],
    }
    if verdict.warnings:
        out["warnings"] = verdict.warnings
    return out


def karmada_score(state: ServerState, body: object) -> dict[str, Any]:
    """``{"scores": [{"name", "score", "intensity", "zone", "source", "dataAgeSeconds"}...]}``."""
    req = parse_karmada(body)
    now = utcnow()
    facts: dict[tuple[str | None, str | None], dict[str, Any]] = {}
    scores = []
    for a in _assess_clusters(state, req):
        shared = facts.get((a.zone, a.reason))
        if shared is None:  # one per zone: every cluster in it gets the same facts
            shared = facts[a.zone, a.reason] = _score_facts(a, now)
        scores.append({"name": a.name, **shared})
    return {"scores": scores}


def _score_facts(a: Assessment, now: datetime) -> dict[str, Any]:
    facts: dict[str, Any] = {
        "score": a.score,
        "intensity": a.intensity,
        "zone": a.zone,
        "source": a.reading.source if a.reading is not None else None,
        "dataAgeSeconds": a.data_age(now),
    }
    if a.reason is not None:
        facts["reason"] = a.reason
    return facts


def extender_filter(state: ServerState, body: object) -> dict[str, Any]:
    """ExtenderFilterResult; removed nodes go to FailedAndUnresolvableNodes."""
    req = parse_extender(body)
    verdict = filter_by_limit(_assess_nodes(state, req), req.limit)
    kept = set(verdict.kept)
    nodes = None
    if req.nodes is not None:
        nodes = {
            "metadata": {},
            "items": [n for n in req.nodes if n["metadata"]["name"] in kept],
        }
    return {
        "Nodes": nodes,
        "NodeNames": verdict.kept if req.nodes is None else None,
        "FailedNodes": {},
        "FailedAndUnresolvableNodes": dict(verdict.removed),
        "Error": "",
    }


def extender_prioritize(state: ServerState, body: object) -> list[dict[str, Any]]:
    """HostPriorityList: ``[{"Host": node, "Score": 0..10}...]``, greener higher."""
    req = parse_extender(body)
    return [{"Host": a.name, "Score": a.extender_score} for a in _assess_nodes(state, req)]


# --- HTTP --------------------------------------------------------------------------------


def _json(data: object, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type=JSON)


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


def _endpoint(name: str, answer: Callable[[ServerState, object], object]) -> Handler:
    """Wrap a pure answer function: parse, time, count, map BadRequest to 400."""
    requests_ok = SCHEDULER_REQUESTS.labels(name, "ok")
    requests_bad = SCHEDULER_REQUESTS.labels(name, "bad_request")
    seconds = SCHEDULER_SECONDS.labels(name)

    async def handler(request: web.Request) -> web.Response:
        raw = await request.read()
        start = time.perf_counter()  # server time: from the whole body to the answer
        try:
            with paused_gc():
                response = _json(answer(request.app[STATE], _loads(raw)))
        except BadRequest as exc:
            requests_bad.inc()
            return _json({"reason": str(exc)}, status=400)
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


ROUTES: Mapping[str, Callable[[ServerState, object], object]] = {
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
