"""A real ``server.serve`` on 127.0.0.1 in the test's event loop (import as ``tests.serving``).

:func:`serving` starts it with a configuration and a certificate directory (a development
CA is created there) and stops it on exit; :class:`Running` is what a test talks to.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from webhook import certs, server
from webhook.config import Config


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Running:
    """A server started in this event loop."""

    def __init__(self, cert_dir: Path, port: int) -> None:
        self.cert_dir = cert_dir
        self.port = port
        self.url = f"https://127.0.0.1:{port}"

    def client_ssl(self) -> ssl.SSLContext:
        """A client context that trusts the server's development CA."""
        return ssl.create_default_context(cafile=str(self.cert_dir / certs.CA_CERT))


async def wait_listening(port: int, attempts: int = 100) -> None:
    for _ in range(attempts):
        with contextlib.suppress(OSError):
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            await writer.wait_closed()
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"nothing listens on 127.0.0.1:{port}")


@contextlib.asynccontextmanager
async def serving(config: Config, cert_dir: Path, **options: Any) -> AsyncIterator[Running]:
    """``server.serve(config, ...)`` on a free port until the block ends."""
    port = free_port()
    stop = asyncio.Event()
    task = asyncio.create_task(
        server.serve(
            config,
            host="127.0.0.1",
            port=port,
            cert_dir=cert_dir,
            cert_reload_seconds=options.pop("cert_reload_seconds", 0.1),
            stop=stop,
            **options,
        )
    )
    try:
        await wait_listening(port)
        yield Running(cert_dir, port)
    finally:
        stop.set()
        await task
