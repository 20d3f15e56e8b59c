"""Scheduler API: Karmada filter/score and the kube-scheduler extender, on the same server.

Routes (registered by :func:`add_routes`):

- ``POST /v1/karmada/filter`` and ``POST /v1/karmada/score``: candidate clusters as
  Karmada describes them plus optional workload facts; answered by the carbonshift
  Karmada scheduler plugin (``karmada-plugin/``).
- ``POST /v1/extender/filter`` and ``POST /v1/extender/prioritize``: kube-scheduler's
  extender protocol (ExtenderArgs in; ExtenderFilterResult / HostPriorityList out, Go
  field names as JSON keys, scores 0..10).
- ``GET /openapi.json``: the OpenAPI 3 document of these endpoints.

Handlers answer from memory only (:meth:`IntensityFeed.snapshot`); every zone a request
names is told to :meth:`IntensityFeed.ask`, which keeps it warm for the background
refresher when a provider of the chain serves it and the bound
(``feed.max_requested_zones``) allows; a zone without data is scored neutral, with the
reason it has none (not yet fetched, not served by any provider, over the bound).
Malformed requests get 400 with ``{"error": "<field>: <problem>"}``, never 500.
A malformed ``carbonshift.io/*`` annotation value on the workload is not a malformed
request: the knob is ignored, the rest answered, the Karmada answers carry a ``warnings``
entry naming it and ``carbonshift_scheduler_ignored_annotations_total`` counts it (a 400
would make the Karmada plugin let every cluster through).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from datetime import datetime
from importlib import resources
from typing import Any

import msgspec
import orjson
from aiohttp import web

from webhook.decision.clusters import (
    Assessment,
    Verdict,
    assess,
    cluster_zone,
    filter_by_limit,
    node_zone,
)
from webhook.model import validation
from webhook.model.intensity import utcnow
from webhook.model.validation import InvalidInput
from webhook.runtime.metrics import (
    SCHEDULER_REQUESTS,
    SCHEDULER_SECONDS,
)
from webhook.serve.schedwire import ExtenderRequest, KarmadaRequest, parse_extender, parse_karmada
from webhook.serve.state import STATE, ServerState

JSON = "application/json"

Handler = Callable[[web.Request], Awaitable[web.Response]]


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
    return assess(req.clusters, resolve, lookup, state.feed.ask, named=known)


def _assess_nodes(state: ServerState, req: ExtenderRequest) -> list[Assessment]:
    """A local node without zone facts of its own is in the local cluster's zone; a Liqo
    virtual node in its remote cluster's (configured by cluster id, hence ``named``)."""
    local = state.nodes.current.zone if state.nodes is not None else None
    if local is not None:
        state.feed.want(local)  # the Nodes' own zone: the fleet's, not the request's
    resolve = functools.partial(node_zone, config=state.config, local=local or state.config.zone)
    peers = {c.name for c in req.candidates if c.peer is not None}
    lookup = state.feed.snapshot().table.get
    return assess(req.candidates, resolve, lookup, state.feed.ask, named=peers)


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
