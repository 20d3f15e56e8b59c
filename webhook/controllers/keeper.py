"""What runs after the leader's re-evaluation has settled: a :class:`Keeper`.

A technology that acts on the managed objects as they stand (the Karmada rebalancer moves
replicas back to greener tiers, the Karpenter price keeper prices the NodePools with
NodeOverlays) is a keeper: a leader controller of its own, registered with the
:class:`~webhook.controllers.follower.Follower`, which tells it how each object of its
kinds stands after each decision (:meth:`Keeper.stand`, :meth:`Keeper.drop`).

Its plan is the fleet's, not one object's: replicas moved back share the room of the
clusters and one move budget, prices are set against one another. So a keeper is a keyed
controller (:class:`~webhook.controllers.runner.KeyedController`) with one key,
:data:`FLEET`, as Karpenter's singleton controllers are (its provisioner, its
disruption): the key is queued when the follower's queue has settled after a change (the
follower calls :meth:`Keeper.settle`), when something else it reads changed
(:meth:`Keeper.moved`: a member's room, a binding; looked at every tick by
:meth:`Keeper.poll`), and again ``reevaluate.interval_seconds`` after each reconcile, as
a safety net. It never runs while the follower has keys queued or in progress, and the
follower's writes wait while it runs, so it plans on the objects as written and knows
which were just rewritten. A reconcile that raises is retried with the key's back-off.
This module names no technology.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING, Any, Final

from webhook.controllers.runner import Cache, KeyedController
from webhook.kinds import Context
from webhook.kube.writes import NotLeader
from webhook.runtime.workqueue import WorkQueue

if TYPE_CHECKING:
    from webhook.controllers.follower import Follower

Obj = dict[str, Any]
FLEET: Final = "fleet"
"""A keeper's one key: its plan is the whole fleet's."""
MOVED_SECONDS = 1.0
"""The least time between two reconciles queued because something else the keeper reads
moved (a member's room, a binding)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Switched:
    """How a keeper has a switch the follower wrote said: the outcome it is counted under
    (instead of ``switched``), its Event and its log line (Karmada's lazy activation)."""

    outcome: str
    reason: str
    """The Event's reason."""
    verb: str
    """The Event's action."""
    note: str
    log: str
    """The log line's event."""


class Keeper(KeyedController[str]):
    """A task run on the managed objects of :attr:`kinds` as they stand; subclasses write
    :meth:`keep` (and, as they need them, :meth:`stand`, :meth:`drop`, :meth:`moved`,
    :meth:`switched`)."""

    kinds: frozenset[str] = frozenset()
    """The kinds whose objects it is told about."""
    every: frozenset[str] = frozenset()
    """Of those, the kinds whose every object it reads, managed or not."""
    caches: tuple[Cache, ...] = ()
    """Watched caches of its own, followed with the follower's (which waits for them
    before its term starts, and stops them)."""
    owned: tuple[Cache, ...] | None = ()

    def __init__(self, follower: Follower) -> None:
        self.follower = follower
        self.gate = follower.gate
        self.api = follower.api
        self.interval = follower.interval
        self.queue = WorkQueue()
        self.changes = True
        """An object it is told about stood differently since its last reconcile."""
        self.quiet = asyncio.Event()
        """Set while no reconcile runs: the follower's writes wait for it."""
        self.quiet.set()
        self._inputs: tuple[object, ...] | None = None
        """The follower's inputs when it last ran."""
        self._moved: tuple[int, ...] | None = None
        self._ended = 0.0
        self._took = 0.0
        """When the last reconcile ended and how long it took (monotonic seconds)."""
        follower.add(self)

    # --- what a technology writes -------------------------------------------------------

    async def keep(self, ctx: Context) -> int | None:
        """Act on the objects as they stand; the number of objects written, None when
        what it reads is not ready yet (it runs again once it is)."""
        raise NotImplementedError

    def stand(self, key: Hashable, obj: Obj, *, rewritten: bool) -> bool:
        """``obj`` (of one of :attr:`kinds`) stands as decided, ``rewritten`` when the
        follower just wrote it; True when that changes what :meth:`keep` would do."""
        return False

    def drop(self, key: Hashable) -> bool:
        """The object ``key`` is gone or no longer managed; True when that matters."""
        return False

    def moved(self) -> tuple[int, ...]:
        """Counters of what else it reads (they grow when it changes)."""
        return ()

    def switched(self, stored: Mapping[str, Any]) -> Switched | None:
        """How a switch the follower wrote of ``stored`` is said (None: as a switch)."""
        return None

    # --- running (never overridden) ------------------------------------------------------

    def keys(self) -> tuple[str]:
        return (FLEET,)

    def synced(self) -> bool:
        """A term starts once the follower's has (its caches, this keeper's among them,
        have synced, and every object is queued to be decided)."""
        return self.follower.in_term

    def changed(self) -> bool:
        """The objects it keeps, the follower's inputs or what else it reads moved, and
        the follower has decided what that changed (its queue is idle)."""
        follower = self.follower
        moved = self.changes or follower.inputs != self._inputs
        if not moved and self.moved() != self._moved:
            # What else it reads changes all the time in a busy fleet: a reconcile for it
            # waits three times as long as the last one took (at most a quarter of a core
            # on it alone), and at least MOVED_SECONDS.
            rest = max(MOVED_SECONDS, 3 * self._took)
            moved = time.monotonic() - self._ended >= rest
        return moved and follower.queue.idle

    def poll(self) -> None:
        if self.changed():
            self.enqueue(self.keys())

    def settle(self) -> None:
        """The follower's queue has settled: reconcile now if that changed anything."""
        self.poll()

    async def reconcile(self, key: str = FLEET) -> float | None:
        """:meth:`keep` on the objects as they stand; due again after the interval (the
        safety net), or once the follower has settled when it is deciding now."""
        if await self.run() is None:
            return None
        return self.interval

    async def run(self) -> int | None:
        """:meth:`keep` once on the objects as they stand; the number written, None when
        the follower is deciding or what it reads is not ready (it runs again then)."""
        follower = self.follower
        if not follower.queue.idle:
            return None  # the follower is deciding: it queues the keeper once settled
        self.quiet.clear()
        started = time.monotonic()
        self._moved, self._inputs, self.changes = self.moved(), follower.inputs, False
        try:
            done = await self.keep(follower.context()) if self.gate.leading else 0
        except NotLeader:
            done = 0
        except BaseException:
            self.changes = True  # what failed is looked at again
            raise
        finally:
            self.quiet.set()
            self._ended = time.monotonic()
            self._took = self._ended - started
        if done is None:
            self.changes = True  # looked at again once ready
        return done
