"""An HTTP client closed while its TLS requests were cancelled in flight (a watch when the
leader stops, a provider fetch on shutdown) leaves no socket behind once the loop ends."""

from __future__ import annotations

import asyncio
import gc
import ssl
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from tests.support import eventually
from webhook.runtime import tasks
from webhook.serve import certs


async def _stream(request: web.Request) -> web.StreamResponse:
    """A watch: one line every 20 ms, forever."""
    response = web.StreamResponse()
    await response.prepare(request)
    while True:
        await response.write(b'{"type":"BOOKMARK"}\n')
        await asyncio.sleep(0.02)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, ssl.SSLContext]]:
    """A TLS watch endpoint on its own loop and thread; a client context trusting it."""
    certs.issue(["127.0.0.1"]).write(tmp_path)
    serving = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    serving.load_cert_chain(tmp_path / certs.TLS_CERT, tmp_path / certs.TLS_KEY)
    app = web.Application()
    app.router.add_get("/watch", _stream)
    runner = web.AppRunner(app)
    loop = asyncio.new_event_loop()

    async def start() -> int:
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=serving)
        await site.start()
        return int(runner.addresses[0][1])

    port = loop.run_until_complete(start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield (
            f"https://127.0.0.1:{port}/watch",
            ssl.create_default_context(cafile=str(tmp_path / certs.CA_CERT)),
        )
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def _cancel_watches_then_close(url: str, context: ssl.SSLContext) -> list[str]:
    """Three loops, each cancelling four watches and closing the session through
    :func:`tasks.closed`; the ResourceWarnings seen once the loops are gone."""

    async def scene() -> None:
        session = aiohttp.ClientSession()
        streaming: set[int] = set()

        async def watch(n: int) -> None:
            async with session.get(url, ssl=context) as response:
                async for _ in response.content:
                    streaming.add(n)

        running = [asyncio.create_task(watch(n)) for n in range(4)]
        await eventually(lambda: len(streaming) == 4, "four watches streaming", seen=streaming.copy)
        for task in running:
            await tasks.cancel(task)
        await tasks.closed(session.close())

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        for _ in range(3):
            asyncio.run(scene())
        gc.collect()
    return [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]


def test_cancelled_tls_requests_leave_no_socket_open(
    server: tuple[str, ssl.SSLContext],
) -> None:
    assert _cancel_watches_then_close(*server) == []


def test_without_the_grace_the_sockets_leak(
    server: tuple[str, ssl.SSLContext], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The grace is what closes them: without it the garbage collector finds them. A
    socket may still close in time by luck of scheduling, so up to five rounds of three
    loops are run until one leaks (each leaks with a very high probability)."""
    monkeypatch.setattr(tasks, "CLOSE_GRACE_SECONDS", 0.0)
    seen: list[list[str]] = []
    for _ in range(5):
        seen.append(_cancel_watches_then_close(*server))
        if any("unclosed" in message for message in seen[-1]):
            return
    pytest.fail(f"no socket leaked without the grace in {len(seen)} rounds: {seen}")
