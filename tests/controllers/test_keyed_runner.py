"""The keyed runner: a term starts once the caches synced, with every key once; watch
changes queue keys; a failing key is retried with back-off without holding up others;
requeue_after brings a key back; losing the Lease drains the queue."""

from __future__ import annotations

from collections import Counter

from tests.support import eventually
from webhook.controllers.runner import KeyedController
from webhook.runtime.workqueue import WorkQueue


class _Gate:
    leading = True


class _Cache:
    """A cache that is synced when the test says so."""

    synced = False
    following = False

    def start(self, api: object, *, timeout_seconds: int = 300) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def list_once(self, api: object) -> None:
        self.synced = True


class _Keyed(KeyedController[str]):
    name = "keyed"

    def __init__(self, gate: _Gate, cache: _Cache) -> None:
        self.gate = gate
        self.api = None
        self.caches = (cache,)
        self.tick = 0.01
        self.queue = WorkQueue(base_delay=0.01, max_delay=0.05)
        self.done: Counter[str] = Counter()
        self.bad = 0
        self.again: dict[str, float] = {}
        self.polled = 0
        self.losses = 0

    def keys(self) -> list[str]:
        return ["a", "b", "c"]

    async def reconcile(self, key: str) -> float | None:
        if key == "bad":
            self.bad += 1
            if self.bad < 3:
                raise RuntimeError("a transient failure")
        self.done[key] += 1
        return self.again.get(key)

    def poll(self) -> None:
        self.polled += 1

    def lost(self) -> None:
        self.losses += 1


async def test_a_term_waits_for_the_caches_then_reconciles_every_key_once() -> None:
    cache = _Cache()
    loop = _Keyed(_Gate(), cache)
    loop.start()
    try:
        await eventually(lambda: loop.polled == 0 and loop.running, "the loop running")
        loop.enqueue(["early"])  # before the term: the term's sync covers every key
        assert not loop.done
        cache.synced = True
        await eventually(
            lambda: set(loop.done) == {"a", "b", "c"}, "every key", seen=lambda: loop.done
        )
        await eventually(lambda: loop.polled >= 2, "polls while leading")
        assert loop.done == Counter({"a": 1, "b": 1, "c": 1})
        loop.enqueue(["b", "b", "d"])
        await eventually(lambda: loop.done["d"] == 1, "a queued key", seen=lambda: loop.done)
        await eventually(lambda: len(loop.queue) == 0 and not loop.queue.processing, "idle")
        assert loop.done == Counter({"a": 1, "b": 2, "c": 1, "d": 1})
    finally:
        await loop.stop()
    assert not loop.running


async def test_a_failing_key_is_retried_without_holding_up_the_others() -> None:
    cache = _Cache()
    cache.synced = True
    loop = _Keyed(_Gate(), cache)
    loop.start()
    try:
        await eventually(lambda: len(loop.done) == 3, "the first sync", seen=lambda: loop.done)
        loop.enqueue(["bad", "e"])
        await eventually(
            lambda: loop.done["bad"] == 1, "bad after two retries", seen=lambda: loop.bad
        )
        assert loop.done["e"] == 1
        assert loop.bad == 3
        assert loop.queue.failures("bad") == 0  # forgotten once it succeeded
    finally:
        await loop.stop()


async def test_requeue_after_brings_a_key_back() -> None:
    cache = _Cache()
    cache.synced = True
    loop = _Keyed(_Gate(), cache)
    loop.again["a"] = 0.01
    loop.start()
    try:
        await eventually(lambda: loop.done["a"] >= 3, "a, due again", seen=lambda: loop.done)
        assert loop.done["b"] == 1
    finally:
        await loop.stop()


async def test_losing_the_lease_drains_the_queue_and_a_new_term_syncs_every_key() -> None:
    gate, cache = _Gate(), _Cache()
    cache.synced = True
    loop = _Keyed(gate, cache)
    loop.again["a"] = 3600.0  # scheduled far ahead: drained with the term
    loop.start()
    try:
        await eventually(lambda: len(loop.done) == 3, "the first term's sync")
        assert len(loop.queue) == 1
        gate.leading = False
        await eventually(lambda: loop.losses > 0, "the term ended")
        assert len(loop.queue) == 0
        loop.enqueue(["x"])  # not leading: ignored
        gate.leading = True
        await eventually(lambda: loop.done["a"] == 2, "the new term's sync", seen=lambda: loop.done)
        await eventually(lambda: loop.done["c"] == 2, "every key again", seen=lambda: loop.done)
        assert loop.done["x"] == 0
    finally:
        await loop.stop()


class _Settling(_Keyed):
    def __init__(self, gate: _Gate, cache: _Cache) -> None:
        super().__init__(gate, cache)
        self.settles = 0

    def settled(self) -> None:
        self.settles += 1


async def test_a_queue_that_empties_says_it_settled_once_per_burst() -> None:
    cache = _Cache()
    cache.synced = True
    loop = _Settling(_Gate(), cache)
    loop.start()
    try:
        await eventually(lambda: loop.settles == 1, "settled after the first keys",
                         seen=lambda: (loop.settles, loop.done))  # fmt: skip
        loop.enqueue(["d", "e"])
        await eventually(lambda: loop.settles == 2, "settled after the burst",
                         seen=lambda: (loop.settles, loop.done))  # fmt: skip
    finally:
        await loop.stop()
