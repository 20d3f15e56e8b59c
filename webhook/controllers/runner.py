"""The runner of the leader's controllers: keyed reconciles.

A controller (:class:`KeyedController`) reconciles one key at a time (``reconcile(key)``),
from its own :class:`~webhook.runtime.workqueue.WorkQueue`: watched caches tell it which
keys changed, :meth:`KeyedController.poll` (asked every tick) which keys the feed's new
readings touch, and ``reconcile`` returns when the key is due again (a score about to
lapse, a round ending, a resync). A term starts once the caches it reads have synced,
with every key queued once; losing the Lease cancels the workers and drains the queue. A
key whose reconcile raises is retried with a per-key exponential back-off. A controller
whose plan is the fleet's rather than one object's (the keepers, the accounting) has one
key, as Karpenter's singleton controllers do.

The application manager (:mod:`webhook.app`) starts the controllers in order and stops
them in reverse, before the elector releases the Lease.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Hashable, Iterable
from typing import Any, Generic, Protocol, TypeVar

import structlog

from webhook.kinds.reevaluation import Outlook
from webhook.kube.writes import Gate
from webhook.model.intensity import IntensityTable
from webhook.runtime import metrics, tasks
from webhook.runtime.workqueue import WorkQueue

log = structlog.get_logger("carbonshift.controllers")

K = TypeVar("K", bound=Hashable)

TICK_SECONDS = 1.0
"""How often a controller looks at leadership and at its inputs."""


class Snapshot(Protocol):
    @property
    def table(self) -> IntensityTable: ...
    @property
    def generation(self) -> int:
        """Grows whenever the table changes."""
        ...


class Feed(Protocol):
    """What controllers read of the :class:`~webhook.feed.IntensityFeed` (a test passes
    its own): the intensities now, the zones to keep warm, the outlook."""

    def snapshot(self) -> Snapshot: ...
    def want(self, zone: str) -> None: ...
    @property
    def outlook(self) -> Outlook: ...


class Retry(Exception):
    """Raised by a keyed reconcile that met a failure and has said so itself: the key is
    retried after its back-off, and the runner logs nothing more."""


class Cache(Protocol):
    """What a keyed controller asks of a watched cache it reads
    (:class:`~webhook.kube.cache.WatchedCache`)."""

    @property
    def synced(self) -> bool: ...
    @property
    def following(self) -> bool: ...
    def start(self, api: Any, *, timeout_seconds: int = 300) -> None: ...
    async def stop(self) -> None: ...
    async def list_once(self, api: Any) -> None: ...


class KeyedController(Generic[K]):
    """A leader loop over keys: subclasses write :meth:`reconcile` (and, if they need
    them, :meth:`keys`, :meth:`poll`, :meth:`lost`, :meth:`describe`) and call
    :meth:`enqueue` from their caches' change callbacks."""

    name: str
    """The task's name and the prefix of its log events."""
    gate: Gate
    """The leader elector: keys are reconciled only while it leads, writes check it."""
    api: Any
    """The API client the caches follow the API server with."""
    caches: tuple[Cache, ...] = ()
    """What :meth:`reconcile` reads, followed from :meth:`start` on (every replica keeps
    them warm): a term starts once all have synced."""
    owned: tuple[Cache, ...] | None = None
    """The caches :meth:`stop` stops (None: all of :attr:`caches`); a cache shared with
    another controller is stopped by the one that made it."""
    workers: int = 1
    """Keys reconciled at once."""
    tick: float = TICK_SECONDS
    queue: WorkQueue[K]
    """The keys to reconcile (made by the subclass)."""
    _task: asyncio.Task[None] | None = None
    _term = False

    async def reconcile(self, key: K) -> float | None:
        """Decide ``key`` (and write what it asks for); seconds until it is due again, or
        None when only a change brings it back."""
        raise NotImplementedError

    def keys(self) -> Iterable[K]:
        """Every key: a term starts by reconciling each once."""
        return ()

    def synced(self) -> bool:
        """Whether a term may start: every cache has synced (a subclass may need less)."""
        return all(c.synced for c in self.caches)

    def poll(self) -> None:
        """Asked every tick while leading: queue the keys whose inputs changed where no
        watch says so (the feed's readings)."""

    def lost(self) -> None:
        """This replica does not lead: drop what the term learnt (asked every tick)."""

    def settled(self) -> None:
        """A reconcile ended and nothing is queued or in progress now (what runs after
        the keys' changes may start)."""

    def describe(self) -> dict[str, Any]:
        """Extra fields of the ``<name>_started`` log line."""
        return {}

    # --- running (never overridden) ------------------------------------------------------

    def enqueue(self, keys: Iterable[K]) -> None:
        """Queue ``keys`` (ignored between terms: a term starts with every key)."""
        if self._term:
            self.queue.add_all(keys)

    def begin_term(self) -> None:
        """Changes queue keys from now on (the runner does this when a term starts)."""
        self._term = True

    async def reconcile_all(self) -> None:
        """Every key reconciled once in turn, as a term's first sync does, by hand (tests,
        benchmarks, the CLI): changes queue keys from now on."""
        self.begin_term()
        self.poll()  # the inputs this sync decides on
        for key in self.keys():
            if not self.gate.leading:
                break
            with contextlib.suppress(Retry):
                await self.reconcile(key)

    def start(self) -> None:
        """Follow the caches and run in the background until :meth:`stop`."""
        for cache in self.caches:
            cache.start(self.api)
        self._task = asyncio.create_task(self._supervise(), name=f"carbonshift-{self.name}")
        log.info(f"{self.name}_started", workers=self.workers, **self.describe())

    async def stop(self) -> None:
        """Stop the loop and its workers (a reconcile in progress is cancelled), then the
        caches."""
        await tasks.cancel(self._task)
        self._task = None
        for cache in self.caches if self.owned is None else self.owned:
            await cache.stop()

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def in_term(self) -> bool:
        """A term runs: this replica leads and the caches had synced (every key was
        queued once when it started)."""
        return self._term

    async def _supervise(self) -> None:
        workers: list[asyncio.Task[None]] = []
        depth = metrics.QUEUE_DEPTH.labels(self.name)
        try:
            while True:
                try:
                    workers = await self._look(workers)
                    depth.set(len(self.queue))
                except asyncio.CancelledError:
                    raise
                except Exception:  # the loop must outlive any bug in one look
                    log.exception(f"{self.name}_tick_failed")
                await asyncio.sleep(self.tick)
        finally:
            self._term = False
            for worker in workers:
                worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)

    async def _look(self, workers: list[asyncio.Task[None]]) -> list[asyncio.Task[None]]:
        """One tick: a term starts or ends with leadership; changes are polled."""
        if not self.gate.leading:
            if self._term:
                self._term = False
                for worker in workers:
                    worker.cancel()
                await asyncio.gather(*workers, return_exceptions=True)
                workers = []
                self.queue.drain()
                log.info(f"{self.name}_term_ended")
            self.lost()
        elif not self._term and self.synced():
            self._term = True
            self.queue.add_all(self.keys())
            workers = [
                asyncio.create_task(self._work(), name=f"carbonshift-{self.name}-{n}")
                for n in range(self.workers)
            ]
            log.info(f"{self.name}_term_started", keys=len(self.queue))
        if self._term:
            try:
                self.poll()
            except Exception:
                log.exception(f"{self.name}_poll_failed")
        return workers

    async def _work(self) -> None:
        while True:
            key = await self.queue.get()
            try:
                after = await self.reconcile(key)
            except asyncio.CancelledError:
                raise
            except Retry:
                self.queue.retry(key)
            except Exception:
                delay = self.queue.retry(key)
                log.exception(
                    f"{self.name}_reconcile_failed", key=str(key), retry_seconds=round(delay, 1)
                )
            else:
                self.queue.forget(key)
                if after is not None:
                    self.queue.add_after(key, after)
            finally:
                self.queue.done(key)
                metrics.CONTROLLER_PASSES.labels(self.name).inc()
            if self.queue.idle:
                self.settled()
