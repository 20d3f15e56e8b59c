"""The HTTPS server: admission endpoint, probes and metrics on one aiohttp app.

Handlers answer from memory: the intensity feed refreshes in the background and no
request waits on the network. Slow clients, oversized headers and bursts are bounded
by :mod:`webhook.serve.guard`; with ``service.client_ca`` the scheduler API and ``/metrics``
require a client certificate (:func:`client_auth`), ``/mutate`` and the probes never.

Shutdown (SIGTERM, SIGINT): stop accepting, let requests in progress finish (within
``shutdown_seconds``), write the admission journal, stop the leader's loops and release
the Lease, stop the feed.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import gc
import os
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import structlog
from aiohttp import hdrs, web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from webhook.feed import IntensityFeed
from webhook.model.config import ClientAuthPath, Config
from webhook.model.errors import ListenError as ListenError  # noqa: PLC0414 - callers import it here
from webhook.model.validation import InvalidInput
from webhook.runtime.metrics import CLIENT_CERT_REFUSED
from webhook.runtime.tasks import closed
from webhook.serve import admission, certs, schedapi
from webhook.serve.guard import (
    WAITED,
    AdmissionGate,
    Drain,
    GuardedSite,
    Limits,
    error_response,
)
from webhook.serve.journal import admissions
from webhook.serve.state import STATE, ServerState
from webhook.serve.tls import ReloadingTLS, has_client_certificate

if TYPE_CHECKING:
    from kubernetes_asyncio.client import ApiClient

    from webhook.kube.accounting import Accountant
    from webhook.kube.carry import Carrier
    from webhook.kube.client import Settings
    from webhook.kube.events import EventRecorder
    from webhook.kube.inventory import FleetInventory
    from webhook.kube.labeler import ClusterLabeler
    from webhook.kube.leader import LeaderElector
    from webhook.kube.nodes import NodeZones
    from webhook.kube.ocm import PlacementScorer
    from webhook.kube.peers import PeerInventory
    from webhook.kube.reevaluator import Reevaluator

    Fleet = tuple[FleetInventory, LeaderElector, ApiClient]

log = structlog.get_logger("carbonshift.server")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

MAX_BODY = 8 * 1024 * 1024
"""Largest accepted request body: an UPDATE review carries object and oldObject."""


_bad_requests = admissions("", "bad_request")

KEEPALIVE_LINGER = 1.0
"""Seconds after SIGTERM during which open keep-alive connections still carry requests.
Closing an idle connection races with a client sending on it: the API server gets EOF,
does not retry a POST and, with ``failurePolicy: Ignore``, admits the object unchanged."""

GATE = web.AppKey("carbonshift_gate", AdmissionGate)
"""The admission bound of the application (see :mod:`webhook.serve.guard`)."""
DRAIN = web.AppKey("carbonshift_drain", Drain)
"""Requests in progress, waited for at shutdown."""

SHED_WARNING = {
    "concurrency": "carbonshift: overloaded (too many admissions in progress); admitted "
    "unchanged, no carbon-aware placement applied",
    "queue": "carbonshift: overloaded (this admission waited too long to be handled); "
    "admitted unchanged, no carbon-aware placement applied",
}


def _json(status: int, payload: object) -> web.Response:
    return web.Response(status=status, body=orjson.dumps(payload), content_type="application/json")


@functools.lru_cache(maxsize=64)
def _is_json(content_type: str) -> bool:
    """``Content-Type: application/json`` (any parameters, any case), by header value:
    API servers send one value, so this costs a cache lookup (aiohttp's
    ``request.content_type`` parses the header anew for every request)."""
    return content_type.partition(";")[0].strip().lower() == "application/json"


def _complete_body(request: web.Request) -> bytes:
    """The body when it is all in and within :data:`MAX_BODY` (an API server's review
    comes with its headers), taken from aiohttp's buffer without its read loop (two
    awaits and a copy); else ``b""``, for ``request.read()``."""
    content = request.content
    if content.is_eof() and content.total_bytes <= MAX_BODY:
        return content.read_nowait()
    return b""


async def mutate(request: web.Request) -> web.Response:
    """``POST /mutate``: one AdmissionReview in, one out."""
    started = time.perf_counter()
    if not _is_json(request.headers.get(hdrs.CONTENT_TYPE, "")):
        _bad_requests.inc()
        return error_response(415, "Content-Type must be application/json")
    gate = request.app[GATE]
    shed = gate.enter(WAITED.get())
    try:
        try:  # read() refuses bodies over MAX_BODY before reading them
            body = _complete_body(request) or await request.read()
        except web.HTTPRequestEntityTooLarge:
            _bad_requests.inc()
            return error_response(413, f"body larger than {MAX_BODY} bytes")
        state = request.app[STATE]
        try:
            if shed:
                outcome = admission.unchanged(body, "overloaded", SHED_WARNING[shed])
            else:
                outcome = admission.review(body, state.context(), state.memo)
        except InvalidInput as exc:
            _bad_requests.inc()
            log.info("admission_rejected", error=str(exc))
            return error_response(400, exc)
    finally:
        gate.leave()
    response = admission.respond(outcome)
    state.journal.record(outcome, time.perf_counter() - started)
    return web.Response(body=response, content_type="application/json")


async def healthz(_request: web.Request) -> web.Response:
    """``GET /healthz``: the process is alive and serving."""
    return _json(200, {"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    """``GET /readyz``: 200 once the feed's first refresh pass ended, else 503.

    A zone without data never keeps the process unready (it ranks last): the body lists
    it under ``missingZones``. With a fleet inventory the body also says whether it
    follows the API server (``inventorySynced``); readiness never depends on it (nor on
    leadership)."""
    state = request.app[STATE]
    feed = state.feed
    extra: dict[str, object] = {}
    if state.inventory is not None:
        extra["inventorySynced"] = state.inventory.synced
    if state.nodes is not None:  # the NodePools' grid zone, and why it is (not) known
        extra["localZone"] = state.nodes.current.readiness()
    if missing := feed.missing():
        extra["missingZones"] = missing
    ready = feed.ready
    body = {"ready": ready, "zones": len(feed.zones()), "staleZones": feed.stale(), **extra}
    return _json(200 if ready else 503, body)


async def prometheus(request: web.Request) -> web.Response:
    """``GET /metrics``: Prometheus text exposition."""
    request.app[STATE].journal.flush()  # admissions recorded so far are counted
    return web.Response(body=generate_latest(), headers={"Content-Type": CONTENT_TYPE_LATEST})


def _group(path: str) -> ClientAuthPath | None:
    """Which ``service.client_auth`` group a path belongs to (None: never protected)."""
    if path.startswith("/v1/"):
        return "scheduler"
    return "metrics" if path == "/metrics" else None


def client_auth(groups: tuple[ClientAuthPath, ...]) -> Any:
    """The middleware that refuses (403) requests to the ``groups`` paths made without a
    client certificate. The TLS handshake has already verified any certificate sent
    against ``service.client_ca``; ``/mutate`` and the probes are never asked for one."""
    protected = frozenset(groups)

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        group = _group(request.path)
        if group in protected:
            transport = request.transport
            peer = transport.get_extra_info("peercert") if transport is not None else None
            if not has_client_certificate(peer):
                CLIENT_CERT_REFUSED.labels(group).inc()
                return error_response(403, f"{request.path}: a client certificate is required")
        return await handler(request)

    return middleware


def build_app(state: ServerState, limits: Limits | None = None) -> web.Application:
    """The aiohttp application with every route. Served by :class:`GuardedSite`, whose
    connections add the header clock, the body deadline, the count of requests in
    progress (``app[DRAIN]``) and the JSON error body, at no cost per request."""
    limits = limits or Limits.of(state.config.service)
    service = state.config.service
    middlewares = []  # none by default: aiohttp then skips building a chain per request
    if service.client_ca is not None:
        middlewares.append(client_auth(service.client_auth))
    app = web.Application(client_max_size=MAX_BODY, middlewares=middlewares)
    app[STATE] = state
    app[GATE] = AdmissionGate(limits)
    app[DRAIN] = Drain()
    app.router.add_post("/mutate", mutate)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", prometheus)
    schedapi.add_routes(app)
    return app


def ensure_certificates(directory: Path, config: Config, extra_hosts: list[str]) -> bool:
    """Create a development CA and serving certificate when ``directory`` is absent or
    empty (:func:`certs.serving_dir`: a folder holding anything else but both ``tls.crt``
    and ``tls.key`` is the user's and is refused, never overwritten).

    Returns True when new files were written.
    """
    hosts = ["localhost", "127.0.0.1", *config.service.dns_names(), *extra_hosts]
    return certs.serving_dir(directory, hosts)


def build_feed(config: Config) -> IntensityFeed:
    """The intensity feed for a configuration: its provider chain, zones in use and cache.

    Raises :class:`InvalidInput` for bad provider options or a bad ``CARBONSHIFT_REDIS_URL``.
    """
    try:
        return IntensityFeed.from_config(config)
    except ValueError as exc:
        if isinstance(exc, InvalidInput):
            raise
        raise InvalidInput("CARBONSHIFT_REDIS_URL", str(exc)) from None


async def serve(
    config: Config,
    *,
    host: str,
    port: int,
    cert_dir: Path,
    cert_reload_seconds: float = 10.0,
    shutdown_seconds: float = 10.0,
    stop: asyncio.Event | None = None,
    kube: Settings | None = None,
) -> None:
    """Run the HTTPS server until SIGTERM/SIGINT (or until ``stop`` is set).

    With ``kube`` (a kubeconfig or the in-cluster service account) the fleet inventory
    and the leader elector run in the background too."""
    feed = build_feed(config)
    if ensure_certificates(cert_dir, config, [host]):
        log.info(
            "development_certificates_created",
            directory=str(cert_dir),
            ca=str(cert_dir / certs.CA_CERT),
            hint="trust ca.crt (caBundle) in the webhook configuration",
        )
    client_ca = config.service.client_ca
    tls = ReloadingTLS(cert_dir, Path(client_ca) if client_ca is not None else None)
    limits = Limits.of(config.service)
    fleet = await _start_fleet(config, kube) if kube is not None else None
    events = _events(fleet, kube) if fleet and kube else None
    labeler = _start_labeler(config, feed, fleet, events) if fleet and events else None
    peers, peer_labeler = _start_peers(config, feed, fleet, events) if fleet else (None, None)
    state = ServerState(
        config=config,
        feed=feed,
        inventory=fleet[0] if fleet else None,
        nodes=_start_nodes(config, fleet) if fleet else None,
        peers=peers,
    )
    reevaluator = _start_reevaluator(config, state, fleet, events) if fleet and events else None
    accountant = _start_accounting(config, state, fleet, kube) if fleet and kube else None
    scorer = _start_ocm(config, feed, fleet) if fleet else None
    carrier = _start_carry(config, fleet, events) if fleet else None
    app = build_app(state, limits)
    runner = web.AppRunner(
        app,
        access_log=None,
        handle_signals=False,
        # What aiohttp still waits for once _drain has waited shutdown_seconds: a request
        # begun meanwhile on a keep-alive connection (each answer asks to close it).
        shutdown_timeout=min(1.0, shutdown_seconds),
        **limits.handler_args(),
    )
    await runner.setup()
    site = GuardedSite(
        runner, host, port, ssl_context=tls.front, reuse_address=True, limits=limits,
        drain=app[DRAIN],
    )  # fmt: skip
    tasks: list[asyncio.Task[None]] = []
    try:  # a failure to listen stops what started above, as a shutdown does
        await listen(site, host, port)
        log.info("serving", url=f"https://{host}:{port}", config_zones=list(config.zones_in_use()))
        if stop is None:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, stop.set)
        await feed.start(wait=False)  # /readyz answers 503 until every zone was asked
        gc.freeze()  # start-up objects never need collecting: shorter GC pauses per request
        tasks.append(asyncio.create_task(tls.watch(cert_reload_seconds), name="cert-watch"))
        await stop.wait()
    finally:
        log.info("shutting_down", in_progress=app[DRAIN].active)
        started = time.monotonic()
        assert runner.server is not None
        await _drain(app, site, shutdown_seconds, runner.server)
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await runner.cleanup()
        app[STATE].journal.flush()
        await _stop_labelers(labeler, peer_labeler)
        for leader_loop in (reevaluator, accountant, scorer, carrier):
            if leader_loop is not None:
                await leader_loop.stop()
        await feed.stop()
        if fleet is not None:
            await _stop_fleet(*fleet, state.nodes, peers)
        log.info("stopped", seconds=round(time.monotonic() - started, 3))


_LISTEN_HINTS = {
    errno.EADDRINUSE: "another process listens there; stop it or pass another --port",
    errno.EACCES: "ports below 1024 need privileges; pass --port 8443",
    errno.EADDRNOTAVAIL: "no interface of this machine has that address; check --host",
}


async def listen(site: web.BaseSite, host: str, port: int) -> None:
    """Start ``site``; an address it cannot bind raises :class:`ListenError` saying why
    (``cannot listen on 127.0.0.1:8443: address already in use (...)``)."""
    try:
        await site.start()
    except OSError as exc:
        reason = os.strerror(exc.errno).lower() if exc.errno else str(exc)
        hint = _LISTEN_HINTS.get(exc.errno or 0)
        raise ListenError(
            f"cannot listen on {host}:{port}: {reason}" + (f" ({hint})" if hint else "")
        ) from None


async def _drain(
    app: web.Application, site: web.BaseSite, seconds: float, server: web.Server
) -> None:
    """Stop accepting connections and let the requests in progress finish, bodies still
    arriving included (aiohttp's own shutdown drops bytes that arrive after it starts);
    meanwhile every answer closes its connection, so keep-alive clients reconnect to
    another replica. Open connections still carry requests until :data:`KEEPALIVE_LINGER`
    seconds after the start, so a busy client learns from an answer that its connection
    closes; aiohttp's shutdown then closes the ones that stayed idle."""
    linger_until = time.monotonic() + min(KEEPALIVE_LINGER, seconds)
    drain = app[DRAIN]
    drain.begin()
    await site.stop()
    if not await drain.wait(seconds):
        log.warning("shutdown_requests_unfinished", in_progress=drain.active, seconds=seconds)
    # aiohttp signals no closed connection: poll
    while server.connections and time.monotonic() < linger_until:  # noqa: ASYNC110
        await asyncio.sleep(0.01)


async def _start_fleet(config: Config, kube: Settings) -> Fleet:
    """Connect to the API server; start the fleet inventory watch and the leader elector."""
    from webhook.kube import client, inventory, leader  # noqa: PLC0415 - only with a cluster

    try:
        api = await client.connect(kube)
    except Exception as exc:  # a missing or unreadable kubeconfig: a usage error
        raise InvalidInput("--kubeconfig", f"cannot load {kube.kubeconfig}: {exc}") from None
    fleet = inventory.FleetInventory(config)
    fleet.start(api)
    elector = leader.LeaderElector(api, kube.identity, namespace=kube.namespace, name=kube.lease)
    elector.start()
    log.info(
        "fleet_watch_started",
        kubeconfig=str(kube.kubeconfig or "in-cluster"),
        lease=f"{kube.namespace}/{kube.lease}",
        identity=kube.identity,
    )
    return fleet, elector, api


def _start_nodes(config: Config, fleet: Fleet) -> NodeZones:
    """The local grid zone from the cluster's Nodes (else config ``zone``)."""
    from webhook.kube.nodes import NodeZones  # noqa: PLC0415 - only with a cluster

    nodes = NodeZones(config.zone)
    nodes.start(fleet[2])
    return nodes


def _events(fleet: Fleet, kube: Settings) -> EventRecorder:
    """The one Event recorder of the leader's loops (writes only while leading)."""
    from webhook.kube.events import EventRecorder  # noqa: PLC0415 - only with a cluster

    _, elector, api = fleet
    return EventRecorder(api, kube.identity, elector)


def _start_labeler(
    config: Config,
    feed: IntensityFeed,
    fleet: Fleet,
    events: EventRecorder,
    peers: PeerInventory | None = None,
) -> ClusterLabeler | None:
    """The Cluster intensity labels (``labels.enabled``), written only while leading;
    with ``peers``, the same labels on Liqo's virtual nodes."""
    if not config.labels.enabled:
        if peers is None:
            log.info("cluster_labels_disabled", hint="labels.enabled is false")
        return None
    from webhook.kube.labeler import NODES, ClusterLabeler  # noqa: PLC0415 - only with a cluster

    inventory, elector, api = fleet
    if peers is not None:
        labeler = ClusterLabeler(api, config, peers, feed, elector, events=events, resource=NODES)
    else:
        labeler = ClusterLabeler(api, config, inventory, feed, elector, events=events)
    labeler.start()
    return labeler


async def _stop_labelers(*labelers: ClusterLabeler | None) -> None:
    """Stop the labelers (before the elector releases the Lease)."""
    for labeler in labelers:
        if labeler is not None:
            await labeler.stop()


def _start_peers(
    config: Config, feed: IntensityFeed, fleet: Fleet, events: EventRecorder | None
) -> tuple[PeerInventory, ClusterLabeler | None]:
    """Liqo's virtual nodes (none where Liqo is not installed) and their intensity labels."""
    from webhook.kube.peers import PeerInventory  # noqa: PLC0415 - only with a cluster

    peers = PeerInventory(config)
    peers.start(fleet[2])
    labeler = _start_labeler(config, feed, fleet, events, peers) if events else None
    return peers, labeler


def _start_reevaluator(
    config: Config, state: ServerState, fleet: Fleet, events: EventRecorder
) -> Reevaluator | None:
    """The leader's re-evaluation of managed policies (``reevaluate.enabled``)."""
    if not config.reevaluate.enabled:
        log.info("reevaluation_disabled", hint="reevaluate.enabled is false")
        return None
    from webhook.kube.reevaluator import Reevaluator  # noqa: PLC0415 - only with a cluster

    _, elector, api = fleet
    reevaluator = Reevaluator(
        api, config, state.context, elector, events=events, outlook=state.feed.outlook
    )
    reevaluator.start()
    return reevaluator


def _start_accounting(
    config: Config, state: ServerState, fleet: Fleet, kube: Settings
) -> Accountant | None:
    """The leader's carbon accounting (``accounting.enabled``), persisted in the lease
    namespace."""
    if not config.accounting.enabled:
        log.info("accounting_disabled", hint="accounting.enabled is false")
        return None
    from webhook.kube.accounting import Accountant  # noqa: PLC0415 - only with a cluster

    _, elector, api = fleet
    accountant = Accountant(api, config, state.context, elector, namespace=kube.namespace)
    accountant.start()
    return accountant


def _start_ocm(config: Config, feed: IntensityFeed, fleet: Fleet) -> PlacementScorer | None:
    """The leader's AddOnPlacementScores for Open Cluster Management (``ocm.enabled``)."""
    if not config.ocm.enabled:
        log.info("ocm_scores_disabled", hint="ocm.enabled is false")
        return None
    from webhook.kube.ocm import PlacementScorer  # noqa: PLC0415 - only with a cluster

    _, elector, api = fleet
    scorer = PlacementScorer(api, config, feed, elector)
    scorer.start()
    return scorer


def _start_carry(config: Config, fleet: Fleet, events: EventRecorder | None) -> Carrier | None:
    """The leader's carrying of managed policies' non-workloads to every tier
    (``carry.enabled``)."""
    if not config.carry.enabled:
        log.info("carry_disabled", hint="carry.enabled is false")
        return None
    from webhook.kube.carry import Carrier  # noqa: PLC0415 - only with a cluster

    _, elector, api = fleet
    carrier = Carrier(api, config, elector, events=events)
    carrier.start()
    return carrier


async def _stop_fleet(
    fleet: FleetInventory,
    elector: LeaderElector,
    api: ApiClient,
    nodes: NodeZones | None = None,
    peers: PeerInventory | None = None,
) -> None:
    for follower in (nodes, peers):
        if follower is not None:
            await follower.stop()
    await elector.stop()  # releases the Lease: another replica takes over at once
    await fleet.stop()
    await closed(api.close())
