"""Background tasks: how every long-running loop runs while this replica leads, and how it
is stopped."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol


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


class Leading(Protocol):
    """Whether this replica holds the leader Lease now (:class:`webhook.kube.writes.Gate`)."""

    @property
    def leading(self) -> bool: ...


async def while_leading(
    gate: Leading,
    interval: float,
    pass_once: Callable[[], Awaitable[object]],
    *,
    failed: Callable[[], None],
    lost: Callable[[], None] | None = None,
    changed: Callable[[], bool] | None = None,
    tick: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> None:
    """Run ``pass_once`` every ``interval`` seconds while ``gate`` leads, forever.

    Looks at leadership every ``tick``: a new term starts with a pass at once, and
    ``lost`` (if any) runs whenever the replica does not lead. ``changed`` (if any) is
    asked every tick in between: True (its inputs moved) runs a pass before the interval
    is up. A pass that raises calls
    ``failed`` (inside the ``except``, so it may log the exception) and the loop goes on:
    it must outlive any bug in one pass. ``clock`` and ``sleep`` are the loop's time
    (a test passes fake ones).
    """
    last: float | None = None
    while True:
        await sleep(tick)
        if not gate.leading:
            last = None
            if lost is not None:
                lost()
            continue
        now = clock()
        if last is not None and now - last < interval and not (changed and changed()):
            continue
        last = now
        try:
            await pass_once()
        except asyncio.CancelledError:
            raise
        except Exception:
            failed()
