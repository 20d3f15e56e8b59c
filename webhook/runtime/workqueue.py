"""A keyed work queue, as controller-runtime's: what a keyed controller reconciles next.

A key is queued at most once however often it is added (a burst of watch events for one
object is one reconcile). A key being reconciled is never handed out twice: added
meanwhile, it is queued again when :meth:`WorkQueue.done` says its reconcile ended, so the
change that came in during the reconcile is not lost. :meth:`WorkQueue.add_after` queues a
key once a delay has passed (a dwell ending, the next forecast hour), the earliest time
asked winning; :meth:`WorkQueue.retry` does the same with a per-key exponential back-off
(a failing object is retried, never in a hot loop, and never holds up the others), which
:meth:`WorkQueue.forget` resets after a success. :meth:`WorkQueue.drain` empties it (the
replica lost the Lease: the next leader decides every key once).

Time is ``clock`` (a test passes a fake one and calls :meth:`WorkQueue.wake` after
moving it).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import time
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class WorkQueue(Generic[K]):
    """Deduplicated keys, ready now or at a time, with per-key back-off."""

    def __init__(
        self,
        *,
        base_delay: float = 0.5,
        max_delay: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.base_delay, self.max_delay = base_delay, max_delay
        self.clock = clock
        self._ready: dict[K, None] = {}  # insertion-ordered: first in, first out
        self._due: dict[K, float] = {}  # key -> when it is ready (the earliest asked)
        self._heap: list[tuple[float, int, K]] = []  # (when, order, key); stale rows skipped
        self._order = 0
        self._processing: set[K] = set()
        self._again: set[K] = set()  # added while being processed
        self._failures: dict[K, int] = {}
        self._changed = asyncio.Event()

    # --- adding ---------------------------------------------------------------------------

    def add(self, key: K) -> None:
        """Queue ``key`` now (once, however often it is added)."""
        self._due.pop(key, None)
        if key in self._processing:
            self._again.add(key)
            return
        if key not in self._ready:
            self._ready[key] = None
            self._changed.set()

    def add_all(self, keys: Iterable[K]) -> None:
        for key in keys:
            self.add(key)

    def add_after(self, key: K, delay: float) -> None:
        """Queue ``key`` once ``delay`` seconds have passed (at once when ``delay`` <= 0);
        a key already due earlier, or ready, keeps the earlier time."""
        if delay <= 0:
            self.add(key)
            return
        if key in self._ready:
            return
        when = self.clock() + delay
        if (held := self._due.get(key)) is not None and held <= when:
            return
        self._due[key] = when
        self._order += 1
        heapq.heappush(self._heap, (when, self._order, key))
        self._changed.set()

    def retry(self, key: K) -> float:
        """Queue ``key`` again after its back-off (``base_delay`` doubled per failure in a
        row, at most ``max_delay``); the delay."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        delay = min(self.max_delay, self.base_delay * 2.0**failures)
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        """``key`` succeeded: its next failure starts the back-off afresh."""
        self._failures.pop(key, None)

    def failures(self, key: K) -> int:
        """Failures of ``key`` in a row."""
        return self._failures.get(key, 0)

    # --- taking ---------------------------------------------------------------------------

    def _promote(self) -> float | None:
        """Move the keys now due to the ready ones; seconds until the next one is due."""
        now = self.clock()
        while self._heap:
            when, _, key = self._heap[0]
            if self._due.get(key) != when:  # superseded or already added
                heapq.heappop(self._heap)
                continue
            if when > now:
                return when - now
            heapq.heappop(self._heap)
            del self._due[key]
            self.add(key)
        return None

    def get_nowait(self) -> K | None:
        """The next ready key (now marked as being processed), or None."""
        self._promote()
        if not self._ready:
            return None
        key = next(iter(self._ready))
        del self._ready[key]
        self._processing.add(key)
        return key

    async def get(self) -> K:
        """Wait for the next ready key; it is being processed until :meth:`done`."""
        while True:
            self._changed.clear()
            key = self.get_nowait()
            if key is not None:
                return key
            # Not asyncio.wait_for: on Python 3.11 it can swallow a cancellation that
            # arrives as the event is set, and the worker would outlive its stop.
            wait = self._promote()
            if wait is None:
                await self._changed.wait()
                continue
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._changed.wait()

    def done(self, key: K) -> None:
        """``key``'s reconcile ended; queued again if it was added meanwhile."""
        self._processing.discard(key)
        if key in self._again:
            self._again.discard(key)
            self.add(key)

    def wake(self) -> None:
        """Look at the clock again (a test moved its fake one)."""
        self._changed.set()

    # --- the whole queue ------------------------------------------------------------------

    def drain(self) -> None:
        """Drop every queued and scheduled key and every back-off; keys in progress
        finish but are not queued again."""
        self._ready.clear()
        self._due.clear()
        self._heap.clear()
        self._again.clear()
        self._failures.clear()

    def __len__(self) -> int:
        """Keys ready or scheduled."""
        return len(self._ready) + len(self._due)

    @property
    def ready(self) -> int:
        """Keys ready now (not those scheduled for later)."""
        self._promote()
        return len(self._ready)

    @property
    def idle(self) -> bool:
        """Nothing ready and nothing being processed (keys may be scheduled)."""
        return not self.ready and not self._processing

    @property
    def processing(self) -> frozenset[K]:
        return frozenset(self._processing)
