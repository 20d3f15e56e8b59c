"""How the HTTPS server protects itself from slow clients, oversized headers and bursts.

- **TLS handshake**: at most ``service.handshake_timeout_seconds`` (asyncio's own timeout,
  passed to ``create_server``), then the socket is closed.
- **Headers**: from the first byte of a request to the end of its headers at most
  ``service.header_timeout_seconds``, then the connection is closed. The clock lives in
  aiohttp's own protocol (:class:`GuardedHandler`): bytes arriving while no request is
  handled stamp the first byte, the handler's start stops the clock and one timer per
  connection, re-armed only when it fires, checks the deadline (as aiohttp's own
  keep-alive timer does): no timer, task or middleware per request. Header lines are
  limited to :data:`MAX_LINE` bytes and a request to :data:`MAX_HEADERS` headers
  (aiohttp answers 400 past either).
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
``{"error": "..."}`` as ``application/json`` (:func:`error_response`), written by
:class:`GuardedHandler` too.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable, Coroutine, Mapping
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
context, so :class:`GuardedHandler` sets it as the handler starts and the handler reads it)."""


def handler_args(service: ServiceConfig) -> dict[str, Any]:
    """Keyword arguments for aiohttp's request handler (via ``AppRunner``): the ``service:``
    section's idle timeout and the fixed header bounds."""
    return {
        "keepalive_timeout": service.idle_timeout_seconds,
        "max_line_size": MAX_LINE,
        "max_field_size": MAX_LINE,
        "max_headers": MAX_HEADERS,
        "lingering_time": LINGER_SECONDS,
    }


def _one_line(message: str | None) -> str:
    """A parser's message without the lines that point at the offending byte
    (``Invalid method encountered: b'GARBAGE'``)."""
    lines = [line.strip() for line in (message or "").splitlines()]
    return " ".join(line for line in lines if line.strip("^"))


Handler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]


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


class GuardedHandler(RequestHandler):
    """aiohttp's protocol for one connection, with the header clock, the body deadline,
    the count of requests in progress for ``drain`` and the JSON error body on every
    error answer, its own included (a request line or headers it cannot parse: 400; an
    unhandled exception: 500).

    Everything per request runs in aiohttp's own synchronous steps (receiving bytes,
    calling the handler, finishing the response): the hooks hand aiohttp its own
    coroutines back, so a request whose body came with its headers costs no extra task,
    coroutine or timer."""

    __slots__ = ("_app_handler", "_body_seconds", "_busy", "_drain", "_first_byte",
                 "_header_seconds", "_header_timer")  # fmt: skip

    def __init__(
        self, manager: web.Server, *, limits: ServiceConfig, drain: Drain, **kwargs: Any
    ) -> None:
        super().__init__(manager, **kwargs)
        self._header_seconds = limits.header_timeout_seconds
        self._body_seconds = limits.body_timeout_seconds
        self._drain = drain
        self._header_timer: asyncio.TimerHandle | None = None
        self._first_byte = 0.0
        """Loop time of the first byte of the request whose headers are awaited (0: none)."""
        self._busy = False
        """A handler of this connection runs (its bytes, and a next request's, start no clock)."""
        self._app_handler = self._request_handler
        self._request_handler = self._dispatch

    def data_received(self, data: bytes) -> None:
        if not self._busy and not self._first_byte and data:
            loop = self._loop
            self._first_byte = now = loop.time()
            if self._header_timer is None:
                self._header_timer = loop.call_at(now + self._header_seconds, self._headers_due)
        super().data_received(data)

    def connection_lost(self, exc: BaseException | None) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        super().connection_lost(exc)

    def _headers_due(self) -> None:
        """The connection's one timer: close it when a request's headers are overdue, else
        check again at the deadline of the request now awaited (if any)."""
        self._header_timer = None
        if not self._first_byte:
            return  # no headers awaited: the next request's first byte arms the timer
        due = self._first_byte + self._header_seconds
        if self._loop.time() < due:  # the headers of a later request: its own deadline
            self._header_timer = self._loop.call_at(due, self._headers_due)
            return
        _header_timeouts.inc()
        if self.transport is not None:
            self.transport.close()

    def _dispatch(self, request: web.BaseRequest) -> Awaitable[web.StreamResponse]:
        """The handler starts: stop the clock (the request waited since its first byte,
        0 when its bytes came in while another request of this connection was handled),
        count the request in progress, bound the wait for a body not all in yet."""
        self._busy = True
        if self._first_byte:
            WAITED.set(self._loop.time() - self._first_byte)
            self._first_byte = 0.0
        self._drain.enter()
        handler = self._app_handler
        assert handler is not None
        if request.content.is_eof():
            return handler(request)
        return _with_body_deadline(request, handler, self._body_seconds)

    def finish_response(  # aiohttp's own coroutine, handed back (no frame of ours)
        self, request: web.BaseRequest, resp: web.StreamResponse, start_time: float | None
    ) -> Coroutine[Any, Any, tuple[web.StreamResponse, bool]]:
        """The handler ended (or raised): an HTTP exception becomes the JSON error; while
        draining every answer closes its connection."""
        if self._busy:
            self._busy = False
            self._drain.leave()
        if isinstance(resp, web.HTTPException) and resp.status >= 400:
            resp = _from_http(request, resp)
        if self._drain.closing:
            resp.force_close()
        return super().finish_response(request, resp, start_time)

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        """aiohttp's error answer (it logs and closes as before) with the JSON body."""
        plain = super().handle_error(request, status, exc, message)
        text = _one_line(message) if status != HTTPStatus.INTERNAL_SERVER_ERROR else ""
        response = error_response(plain.status, text or plain.reason or str(plain.status))
        response.force_close()
        return response


class GuardedSite(web.TCPSite):
    """``TCPSite`` with a TLS handshake timeout whose connections are
    :class:`GuardedHandler`."""

    __slots__ = ("_drain", "_limits")

    def __init__(self, runner: web.BaseRunner, host: str, port: int, **kwargs: Any) -> None:
        self._limits: ServiceConfig = kwargs.pop("limits")
        self._drain: Drain = kwargs.pop("drain")
        super().__init__(runner, host, port, **kwargs)

    async def start(self) -> None:
        self._runner._reg_site(self)  # what BaseSite.start does
        server = self._runner.server
        assert server is not None
        loop = asyncio.get_running_loop()
        limits, drain = self._limits, self._drain
        options = server._kwargs  # what web.Server passes to its RequestHandler

        def protocol() -> GuardedHandler:
            return GuardedHandler(server, loop=loop, limits=limits, drain=drain, **options)

        self._server = await loop.create_server(
            protocol,
            self._host,
            self._port,
            ssl=self._ssl_context,
            ssl_handshake_timeout=self._limits.handshake_timeout_seconds
            if self._ssl_context is not None
            else None,
            backlog=self._backlog,
            reuse_address=self._reuse_address,
            reuse_port=self._reuse_port,
        )
        sockets = self._server.sockets
        self._bound_port = sockets[0].getsockname()[1] if sockets else self._port


async def _with_body_deadline(
    request: web.BaseRequest, handler: Handler, seconds: float
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

    def __init__(self, limits: ServiceConfig) -> None:
        self.limit = limits.max_concurrent_admissions
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
