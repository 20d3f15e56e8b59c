"""Background tasks: how a long-running task is stopped, and how an HTTP client is closed."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Any


async def cancel(task: asyncio.Task[Any] | None) -> None:
    """Cancel a background task and wait until it has stopped (None: nothing runs)."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


CLOSE_GRACE_SECONDS = 0.25
"""How long a closed HTTP client's TLS connections get to finish their shutdown (aiohttp's
own advice for a graceful shutdown)."""


async def closed(close: Awaitable[None], *, tls: bool = True) -> None:
    """Await an HTTP client's ``close()``, then give the TLS connections it dropped time to
    finish closing. aiohttp closes a cancelled request's TLS connection without waiting for
    it (aio-libs/aiohttp#1925): an event loop that ends right after would leave the socket
    open for the garbage collector to find. ``tls=False`` (a client of plain HTTP only):
    nothing to wait for."""
    await close
    if tls:
        await asyncio.sleep(CLOSE_GRACE_SECONDS)
