"""The keyed work queue: deduplicated keys, never handed out twice, delays and back-off on
a fake clock."""

from __future__ import annotations

import asyncio

from tests.support import Clock
from webhook.runtime.workqueue import WorkQueue


def queue(clock: Clock) -> WorkQueue[str]:
    return WorkQueue(base_delay=1.0, max_delay=8.0, clock=clock.monotonic)


def taken(q: WorkQueue[str]) -> list[str]:
    """Every ready key, in order, each marked done."""
    out = []
    while (key := q.get_nowait()) is not None:
        out.append(key)
        q.done(key)
    return out


def test_a_key_added_many_times_is_queued_once_in_first_in_order() -> None:
    q = queue(Clock())
    for key in ("b", "a", "b", "c", "a"):
        q.add(key)
    assert len(q) == 3
    assert taken(q) == ["b", "a", "c"]
    assert q.get_nowait() is None


def test_a_key_added_while_processed_comes_back_once_done() -> None:
    q = queue(Clock())
    q.add("a")
    assert q.get_nowait() == "a"
    q.add("a")
    q.add("a")
    assert q.get_nowait() is None, "handed out twice while being reconciled"
    q.done("a")
    assert q.get_nowait() == "a"
    q.done("a")
    assert q.get_nowait() is None


def test_add_after_waits_for_the_clock_and_the_earliest_time_wins() -> None:
    clock = Clock()
    q = queue(clock)
    q.add_after("a", 10)
    q.add_after("a", 30)  # later: the earlier stays
    q.add_after("b", 20)
    q.add_after("b", 5)  # earlier: wins
    assert q.get_nowait() is None
    clock.advance(seconds=5)
    assert taken(q) == ["b"]
    clock.advance(seconds=4.9)
    assert taken(q) == []
    clock.advance(seconds=0.2)
    assert taken(q) == ["a"]
    clock.advance(seconds=60)
    assert taken(q) == [], "a superseded time queued the key again"


def test_a_key_added_now_is_not_queued_again_by_its_old_time() -> None:
    clock = Clock()
    q = queue(clock)
    q.add_after("a", 10)
    q.add("a")
    assert taken(q) == ["a"]
    clock.advance(seconds=11)
    assert taken(q) == []


def test_retry_backs_off_exponentially_up_to_the_cap_and_forget_resets_it() -> None:
    clock = Clock()
    q = queue(clock)
    delays = [q.retry("a") for _ in range(6)]
    assert delays == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert q.failures("a") == 6
    q.forget("a")
    assert q.failures("a") == 0
    assert q.retry("a") == 1.0


def test_a_failing_key_does_not_hold_up_the_others() -> None:
    clock = Clock()
    q = queue(clock)
    q.add_all(["bad", "good"])
    assert q.get_nowait() == "bad"
    q.retry("bad")
    q.done("bad")
    assert taken(q) == ["good"]
    clock.advance(seconds=1)
    assert taken(q) == ["bad"]


def test_drain_drops_everything_queued_and_what_was_added_during_a_reconcile() -> None:
    clock = Clock()
    q = queue(clock)
    q.add_all(["a", "b"])
    q.add_after("c", 5)
    q.retry("d")
    assert q.get_nowait() == "a"
    q.add("a")  # during its reconcile
    q.drain()
    q.done("a")
    clock.advance(seconds=60)
    assert len(q) == 0
    assert taken(q) == []
    assert q.failures("d") == 0


async def test_get_waits_for_a_key_added_by_another_task() -> None:
    q: WorkQueue[str] = WorkQueue()
    assert q.get_nowait() is None  # nothing queued: get() must wait for the add
    waiting = asyncio.create_task(q.get())
    q.add("a")
    assert await asyncio.wait_for(waiting, 5) == "a"
    assert q.processing == {"a"}


async def test_get_returns_a_delayed_key_once_the_clock_reaches_it() -> None:
    clock = Clock()
    q = queue(clock)
    q.add_after("a", 30)
    waiting = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    clock.advance(seconds=30)
    q.wake()
    assert await asyncio.wait_for(waiting, 5) == "a"
