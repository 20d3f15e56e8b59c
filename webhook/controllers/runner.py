"""The one periodic runner of the leader's controllers.

A controller is a class with a :meth:`Controller.reconcile` method: one pass over what it
keeps (the managed policies, the Clusters' labels, the accounting ledger...). Everything
else is here, once: the background task, running a pass every ``interval`` seconds while
this replica holds the Lease (a new term starts with a pass at once), an early pass when
the controller's inputs changed (:meth:`Controller.changed`), forgetting what a term
learnt when leadership is lost (:meth:`Controller.lost`), and a failed pass logged (and
counted, :meth:`Controller.failed`) without stopping the loop.

The application manager (:mod:`webhook.app`) starts the controllers in order and stops
them in reverse, before the elector releases the Lease.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

import structlog

from webhook.kinds.following import Outlook
from webhook.kube.writes import Gate
from webhook.model.intensity import IntensityTable
from webhook.runtime import metrics, tasks

log = structlog.get_logger("carbonshift.controllers")

TICK_SECONDS = 1.0
"""How often a controller looks at leadership and at its inputs."""


class Snapshot(Protocol):
    @property
    def table(self) -> IntensityTable: ...


class Feed(Protocol):
    """What controllers read of the :class:`~webhook.feed.IntensityFeed` (a test passes
    its own): the intensities now, the zones to keep warm, the outlook."""

    def snapshot(self) -> Snapshot: ...
    def want(self, zone: str) -> None: ...
    @property
    def outlook(self) -> Outlook: ...


class Controller:
    """A leader loop: subclasses write :meth:`reconcile` (and, if they need them, the hooks
    :meth:`changed`, :meth:`lost`, :meth:`failed` and :meth:`describe`)."""

    name: str
    """The task's name and the prefix of its log events (``<name>_started``,
    ``<name>_pass_failed``)."""
    gate: Gate
    """The leader elector: passes run only while it leads, writes check it."""
    interval: float
    """Seconds between passes."""
    tick: float = TICK_SECONDS
    _task: asyncio.Task[None] | None = None

    async def reconcile(self) -> object:
        """One pass; what it returns is for tests and benchmarks (counts, outcomes)."""
        raise NotImplementedError

    def changed(self) -> bool:
        """True when the inputs moved since the last pass: pass before the interval is up."""
        return False

    def lost(self) -> None:
        """This replica does not lead: drop what the term learnt (asked every tick)."""

    def failed(self) -> None:
        """A pass raised (called inside the ``except``): log it with its traceback."""
        log.exception(f"{self.name}_pass_failed")

    def describe(self) -> dict[str, Any]:
        """Extra fields of the ``<name>_started`` log line."""
        return {}

    # --- running (never overridden) ------------------------------------------------------

    def start(self) -> None:
        """Run in the background until :meth:`stop`."""
        run = tasks.while_leading(
            self.gate,
            self.interval,
            self._counted,
            failed=self.failed,
            lost=self.lost,
            changed=self.changed,
            tick=self.tick,
        )
        self._task = asyncio.create_task(run, name=f"carbonshift-{self.name}")
        log.info(f"{self.name}_started", interval_seconds=self.interval, **self.describe())

    async def stop(self) -> None:
        """Stop the loop and wait until it has stopped (a pass in progress is cancelled)."""
        await tasks.cancel(self._task)
        self._task = None

    async def _counted(self) -> object:
        """One pass, counted in ``carbonshift_controller_passes_total`` once it has ended
        (what a test waits for before asserting that passes changed nothing)."""
        try:
            return await self.reconcile()
        finally:
            metrics.CONTROLLER_PASSES.labels(self.name).inc()

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()
