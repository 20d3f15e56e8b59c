"""How the HTTPS server protects itself from slow clients, oversized headers and bursts.

- **TLS handshake**: at most ``service.handshake_timeout_seconds`` (asyncio's own timeout,
  passed to ``create_server``), then the socket is closed.
- **Headers**: from the first byte of a request to the end of its headers at most
  ``service.header_timeout_seconds``: each connection's protocol is wrapped by
  :class:`_HeaderDeadline`, which arms a timer when bytes arrive on an idle connection
  and disarms it when a handler starts (:func:`deadlines`, a middleware); on expiry the
  connection is closed. Header lines are limited to :data:`MAX_LINE` bytes and a request
  to :data:`MAX_HEADERS` headers (aiohttp answers 400 past either).
- **Body**: a request whose body is not all in when its handler starts gets
  ``service.body_timeout_seconds`` for the rest (then 408 with a JSON error). Bodies that
  arrived with their headers, the normal case, cost no timer.
- **Idle keep-alive connections** close after ``service.idle_timeout_seconds``.
- **Admission load**: :class:`AdmissionGate` counts admissions in progress; past
  ``service.max_concurrent_admissions``, or when an admission waited longer than
  ``service.max_queue_seconds`` from its first byte to its handler (the event loop was
  busy with others), it is answered at once, allowed and unchanged with a warning,
  instead of queueing into kube-apiserver's ``timeoutSeconds``. Decisions are
  synchronous, so under a burst admissions queue on the event loop, not in handlers:
  the wait is what grows, and shedding (a few tens of microseconds against a few
  hundred for a decision) drains the queue.

Every refusal is counted (:data:`~webhook.runtime.metrics.SHED`,
:data:`~webhook.runtime.metrics.TIMEOUTS`).

Every error answer, carbonshift's own and aiohttp's (404 for an unknown path, 405 for a
wrong method, 400 for a request line or headers it cannot parse, 500), has one shape:
``{"error": "..."}`` as ``application/json`` (:func:`error_response`): aiohttp's HTTP
exceptions through the :func:`json_errors` middleware, its protocol-level answers
through :class:`JsonErrorHandler`.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from http import HTTPStatus
from typing import Any

import structlog
from aiohttp import hdrs, web
from aiohttp.web_protocol import RequestHandler

from webhook.model.config import ServiceConfig
from webhook.model.validation import InvalidInput, error_body
from webhook.runtime.metrics import SHED, TIMEOUTS

log = structlog.get_logger("carbonshift.guard")

MAX_LINE = 8190
"""Longest request line or header line, in bytes (aiohttp's default, stated here)."""
MAX_HEADERS = 64
"""Most headers one request may carry (kube-apiserver sends fewer than ten)."""
LINGER_SECONDS = 1.0
"""After answering a request whose body is not all in (408, 413), how long the rest is
read and dropped before the connection closes (so the client reads the answer)."""

_header_timeouts = TIMEOUTS.labels("header")
_body_timeouts = TIMEOUTS.labels("body")
_shed_concurrency = SHED.labels("concurrency")
_shed_queue = SHED.labels("queue")
WAITED: contextvars.ContextVar[float] = contextvars.ContextVar("carbonshift_waited", default=0.0)
"""Seconds from the request's first byte to its handler (each request's task has its own
context, so the middleware sets it and the handler reads it)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Limits:
    """The server's limits, from the ``service:`` section of the configuration."""

    handshake_seconds: float = 10.0
    header_seconds: float = 10.0
    body_seconds: float = 10.0
    idle_seconds: float = 120.0
    max_admissions: int = 256
    max_queue_seconds: float = 1.0

    @classmethod
    def of(cls, service: ServiceConfig) -> Limits:
        return cls(
            handshake_seconds=service.handshake_timeout_seconds,
            header_seconds=service.header_timeout_seconds,
            body_seconds=service.body_timeout_seconds,
            idle_seconds=service.idle_timeout_seconds,
            max_admissions=service.max_concurrent_admissions,
            max_queue_seconds=service.max_queue_seconds,
        )

    def handler_args(self) -> dict[str, Any]:
        """Keyword arguments for aiohttp's request handler (via ``AppRunner``)."""
        return {
            "keepalive_timeout": self.idle_seconds,
            "max_line_size": MAX_LINE,
            "max_field_size": MAX_LINE,
            "max_headers": MAX_HEADERS,
            "lingering_time": LINGER_SECONDS,
        }


class _HeaderDeadline(asyncio.Protocol):
    """aiohttp's protocol for one connection, with a deadline on receiving headers.

    Bytes arriving while no handler runs start the clock (the first bytes of the next
    request); :meth:`request_started` stops it and says how long the request waited,
    :meth:`request_finished` lets the next bytes start it again. Everything else is
    passed through unchanged."""

    __slots__ = ("_arrived", "_busy", "_inner", "_seconds", "_timer", "_transport")

    def __init__(self, inner: asyncio.Protocol, seconds: float) -> None:
        self._inner = inner
        self._seconds = seconds
        self._timer: asyncio.TimerHandle | None = None
        self._transport: asyncio.BaseTransport | None = None
        self._busy = 0
        self._arrived = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport
        self._inner.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if not self._busy and self._timer is None:
            loop = asyncio.get_running_loop()
            self._arrived = now = loop.time()
            self._timer = loop.call_at(now + self._seconds, self._expired)
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()

    def request_started(self) -> float:
        """Stop the clock; the seconds since the request's first byte (0 when its bytes
        came in while another request of this connection was being handled)."""
        self._busy += 1
        if self._timer is None:
            return 0.0
        self._disarm()
        return asyncio.get_running_loop().time() - self._arrived

    def request_finished(self) -> None:
        self._busy -= 1

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expired(self) -> None:
        self._timer = None
        _header_timeouts.inc()
        if self._transport is not None:
            self._transport.close()


def _one_line(message: str | None) -> str:
    """A parser's message without the lines that point at the offending byte
    (``Invalid method encountered: b'GARBAGE'``)."""
    lines = [line.strip() for line in (message or "").splitlines()]
    return " ".join(line for line in lines if line.strip("^"))


class GuardedSite(web.TCPSite):
    """``TCPSite`` with a TLS handshake timeout and the header deadline on every
    connection."""

    __slots__ = ("_limits",)

    def __init__(self, runner: web.BaseRunner, host: str, port: int, **kwargs: Any) -> None:
        self._limits: Limits = kwargs.pop("limits")
        super().__init__(runner, host, port, **kwargs)

    async def start(self) -> None:
        self._runner._reg_site(self)  # what BaseSite.start does
        server = self._runner.server
        assert server is not None
        seconds = self._limits.header_seconds

        def protocol() -> asyncio.Protocol:
            handler = server()
            handler.__class__ = JsonErrorHandler  # same slots: only handle_error differs
            return _HeaderDeadline(handler, seconds)

        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            protocol,
            self._host,
            self._port,
            ssl=self._ssl_context,
            ssl_handshake_timeout=self._limits.handshake_seconds
            if self._ssl_context is not None
            else None,
            backlog=self._backlog,
            reuse_address=self._reuse_address,
            reuse_port=self._reuse_port,
        )
        sockets = self._server.sockets
        self._bound_port = sockets[0].getsockname()[1] if sockets else self._port


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def error_response(
    status: int, error: InvalidInput | str, headers: Mapping[str, str] | None = None
) -> web.Response:
    """The answer for an error: ``status`` with ``{"error": "..."}`` as JSON."""
    return web.Response(
        status=status, body=error_body(error), content_type="application/json", headers=headers
    )


def _from_http(request: web.BaseRequest, exc: web.HTTPException) -> web.Response:
    """aiohttp's exception as a JSON error: its own text when it has one, else
    ``<method> <path>: <reason>`` (a 405 adds the methods allowed); headers such as
    ``Allow`` are kept."""
    text = exc.text or ""
    if not text or text == f"{exc.status}: {exc.reason}":
        text = f"{request.method} {request.path}: {exc.reason}"
        if isinstance(exc, web.HTTPMethodNotAllowed):
            text += f" (allowed: {', '.join(sorted(exc.allowed_methods))})"
    kept = {k: v for k, v in exc.headers.items() if k not in _BODY_HEADERS}
    return error_response(exc.status, text, kept)


_BODY_HEADERS = frozenset({hdrs.CONTENT_TYPE, hdrs.CONTENT_LENGTH})


@web.middleware
async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The middleware that answers aiohttp's HTTP errors (no route: 404, wrong method:
    405...) with the JSON error body; the outermost one, so it sees every handler's."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return _from_http(request, exc)


class JsonErrorHandler(RequestHandler):
    """aiohttp's protocol for one connection, whose own error answers (a request line or
    headers it cannot parse: 400; an unhandled exception: 500) carry the JSON error body.
    aiohttp logs and closes as before; only the body changes."""

    __slots__ = ()

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        plain = super().handle_error(request, status, exc, message)
        text = _one_line(message) if status != HTTPStatus.INTERNAL_SERVER_ERROR else ""
        response = error_response(plain.status, text or plain.reason or str(plain.status))
        response.force_close()
        return response


class Drain:
    """Requests in progress, for a graceful shutdown: once :meth:`begin` is called every
    answer closes its connection (clients reconnect, to another replica), and
    :meth:`wait` returns when nothing is in progress any more."""

    __slots__ = ("_idle", "active", "closing")

    def __init__(self) -> None:
        self.active = 0
        self.closing = False
        self._idle: asyncio.Event | None = None

    def enter(self) -> None:
        self.active += 1

    def leave(self) -> None:
        self.active -= 1
        if not self.active and self._idle is not None:
            self._idle.set()

    def begin(self) -> None:
        self.closing = True
        self._idle = asyncio.Event()

    async def wait(self, seconds: float) -> bool:
        """Wait up to ``seconds`` for the requests in progress; whether they all ended."""
        if not self.active:
            return True
        assert self._idle is not None, "begin() first"
        try:
            async with asyncio.timeout(seconds):
                await self._idle.wait()
        except TimeoutError:
            return False
        return True


def deadlines(limits: Limits, drain: Drain) -> Any:
    """The middleware that stops a connection's header clock while its handler runs,
    bounds the wait for a body that is not all in yet and counts requests in progress
    for ``drain``."""
    body_seconds = limits.body_seconds

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        transport = request.transport
        protocol = transport.get_protocol() if transport is not None else None
        guard = protocol if isinstance(protocol, _HeaderDeadline) else None
        if guard is not None:
            WAITED.set(guard.request_started())
        drain.enter()
        try:
            if guard is None or request.content.is_eof():
                response = await handler(request)
            else:
                response = await _with_body_deadline(request, handler, body_seconds)
        finally:
            drain.leave()
            if guard is not None:
                guard.request_finished()
        if drain.closing:
            response.force_close()
        return response

    return middleware


async def _with_body_deadline(
    request: web.Request, handler: Handler, seconds: float
) -> web.StreamResponse:
    try:
        async with asyncio.timeout(seconds):
            return await handler(request)
    except TimeoutError:
        _body_timeouts.inc()
        response = error_response(408, f"request body not received within {seconds:g} s")
        response.force_close()
        return response


class AdmissionGate:
    """Admissions in progress, against the bounds: :meth:`enter` says why this one must
    be shed (``concurrency``, ``queue``) or ``""`` when it may be decided; :meth:`leave`
    once it is answered, whatever the answer."""

    __slots__ = ("active", "limit", "max_wait")

    def __init__(self, limits: Limits) -> None:
        self.limit = limits.max_admissions
        self.max_wait = limits.max_queue_seconds
        self.active = 0

    def enter(self, waited: float) -> str:
        self.active += 1
        if self.active > self.limit:
            _shed_concurrency.inc()
            return "concurrency"
        if waited > self.max_wait:
            _shed_queue.inc()
            return "queue"
        return ""

    def leave(self) -> None:
        self.active -= 1
