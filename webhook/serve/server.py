"""The HTTPS server: admission endpoint, probes and metrics on one aiohttp app
(:class:`HttpsServer`, one part of the process :mod:`webhook.app` starts).

Handlers answer from memory: the intensity feed refreshes in the background and no
request waits on the network. Slow clients, oversized headers and bursts are bounded
by :mod:`webhook.serve.guard`; with ``service.client_ca`` the scheduler API and ``/metrics``
require a client certificate (:func:`client_auth`), ``/mutate`` and the probes never.

Shutdown: stop accepting, let requests in progress finish (within ``shutdown_seconds``),
write the admission journal; the application manager then stops the rest.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
import structlog
from aiohttp import hdrs, web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from webhook.model.config import ClientAuthPath, Config
from webhook.model.errors import ListenError as ListenError  # noqa: PLC0414 - callers import it here
from webhook.model.validation import InvalidInput
from webhook.runtime.metrics import CLIENT_CERT_REFUSED, REQUESTS_IN_PROGRESS
from webhook.runtime.tasks import cancel
from webhook.serve import admission, certs, schedapi
from webhook.serve.guard import (
    WAITED,
    AdmissionGate,
    Drain,
    GuardedSite,
    error_response,
    handler_args,
)
from webhook.serve.journal import admissions
from webhook.serve.state import STATE, ServerState
from webhook.serve.tls import ReloadingTLS, has_client_certificate

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
    follows the API server (``inventorySynced``) and which shape the ordered fill takes and
    why (``karmada``: what the Karmada policy API keeps); readiness never depends on them
    (nor on leadership)."""
    state = request.app[STATE]
    feed = state.feed
    extra: dict[str, object] = {}
    if state.inventory is not None:
        extra["inventorySynced"] = state.inventory.synced
    if state.crds is not None:
        api = state.karmada()
        extra["karmada"] = {"shape": api.shape, "source": api.source, "why": api.why}
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


def build_app(state: ServerState) -> web.Application:
    """The aiohttp application with every route. Served by :class:`GuardedSite`, whose
    connections add the header clock, the body deadline, the count of requests in
    progress (``app[DRAIN]``) and the JSON error body, at no cost per request."""
    service = state.config.service
    middlewares = []  # none by default: aiohttp then skips building a chain per request
    if service.client_ca is not None:
        middlewares.append(client_auth(service.client_auth))
    app = web.Application(client_max_size=MAX_BODY, middlewares=middlewares)
    app[STATE] = state
    app[GATE] = AdmissionGate(service)
    app[DRAIN] = drain = Drain()
    REQUESTS_IN_PROGRESS.set_function(lambda: drain.active)
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


class HttpsServer:
    """The HTTPS server as one part of the process (:mod:`webhook.app`): listens on
    :meth:`start`, and on :meth:`stop` drains (requests in progress finish within
    ``shutdown_seconds``) and writes the admission journal."""

    name = "https"

    def __init__(
        self,
        state: ServerState,
        *,
        host: str,
        port: int,
        cert_dir: Path,
        cert_reload_seconds: float = 10.0,
        shutdown_seconds: float = 10.0,
    ) -> None:
        self.state = state
        self.host, self.port = host, port
        self.shutdown_seconds = shutdown_seconds
        self.cert_reload_seconds = cert_reload_seconds
        client_ca = state.config.service.client_ca
        self.tls = ReloadingTLS(cert_dir, Path(client_ca) if client_ca is not None else None)
        self.limits = state.config.service
        self.app = build_app(state)
        self._runner: web.AppRunner | None = None
        self._site: GuardedSite | None = None
        self._watch: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Listen (:class:`ListenError` when the address cannot be bound) and follow the
        certificate files."""
        runner = self._runner = web.AppRunner(
            self.app,
            access_log=None,
            handle_signals=False,
            # What aiohttp still waits for once _drain has waited shutdown_seconds: a
            # request begun meanwhile on a keep-alive connection (each answer asks to close).
            shutdown_timeout=min(1.0, self.shutdown_seconds),
            **handler_args(self.limits),
        )
        await runner.setup()
        self._site = GuardedSite(
            runner, self.host, self.port, ssl_context=self.tls.front, reuse_address=True,
            limits=self.limits, drain=self.app[DRAIN],
        )  # fmt: skip
        try:
            await listen(self._site, self.host, self.port)
        except ListenError:
            await runner.cleanup()
            raise
        self._watch = asyncio.create_task(
            self.tls.watch(self.cert_reload_seconds), name="cert-watch"
        )
        log.info(
            "serving",
            url=f"https://{self.host}:{self.port}",
            config_zones=list(self.state.config.zones_in_use()),
        )

    async def stop(self) -> None:
        """Drain, stop listening, write the admission journal."""
        runner, site = self._runner, self._site
        if runner is None or site is None:
            return
        log.info("shutting_down", in_progress=self.app[DRAIN].active)
        assert runner.server is not None
        await _drain(self.app, site, self.shutdown_seconds, runner.server)
        await cancel(self._watch)
        await runner.cleanup()
        self.state.journal.flush()
        self._runner = self._site = self._watch = None


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
