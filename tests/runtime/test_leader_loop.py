"""The one leader-gated periodic loop (``tasks.while_leading``) the re-evaluator, the
carbon accounting, the OCM scores and the labelers run on, with a fake clock: no
wall-clock sleeps as barriers."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from webhook.runtime import tasks


@dataclasses.dataclass
class World:
    """A fake clock, a Lease holder switch and what the loop did, tick by tick."""

    leading: bool = True
    now: float = 0.0
    passes: list[float] = dataclasses.field(default_factory=list)
    failures: int = 0
    lost: int = 0
    ticks: int = 0
    stop_after: int = 100
    fail_at: frozenset[float] = frozenset()

    async def sleep(self, seconds: float) -> None:
        self.ticks += 1
        if self.ticks > self.stop_after:
            raise asyncio.CancelledError
        self.now += seconds
        self.script()

    def script(self) -> None:
        """Leadership over time: lost from t=20 to t=40."""
        self.leading = not 20 <= self.now < 40

    async def pass_once(self) -> None:
        self.passes.append(self.now)
        if self.now in self.fail_at:
            raise RuntimeError("a bug in one pass")

    def failed(self) -> None:
        self.failures += 1

    def forget(self) -> None:
        self.lost += 1


async def run(world: World, interval: float) -> None:
    with pytest.raises(asyncio.CancelledError):
        await tasks.while_leading(
            world,
            interval,
            world.pass_once,
            failed=world.failed,
            lost=world.forget,
            clock=lambda: world.now,
            sleep=world.sleep,
        )


async def test_passes_every_interval_while_leading_and_at_once_in_a_new_term() -> None:
    world = World(stop_after=60)
    await run(world, interval=10)
    # t=1 first tick of the first term; then every 10 s; lost at 20..39; a new term at 40
    assert world.passes == [1.0, 11.0, 40.0, 50.0, 60.0]
    assert world.lost == 20  # once per tick without the Lease


async def test_a_failing_pass_is_reported_and_the_loop_goes_on() -> None:
    world = World(stop_after=30, fail_at=frozenset({11.0}))
    await run(world, interval=10)
    assert world.passes == [1.0, 11.0]
    assert world.failures == 1


async def test_without_the_lease_nothing_runs() -> None:
    world = World(stop_after=15)
    world.script = lambda: setattr(world, "leading", False)  # type: ignore[method-assign]
    world.leading = False
    await run(world, interval=1)
    assert world.passes == []
    assert world.lost == 15


async def test_a_change_of_inputs_runs_a_pass_before_the_interval_is_up() -> None:
    world = World(stop_after=18)
    moves = {5.0, 6.0, 13.0}  # the feed or the fleet changed at these ticks

    with pytest.raises(asyncio.CancelledError):
        await tasks.while_leading(
            world,
            100,
            world.pass_once,
            failed=world.failed,
            changed=lambda: world.now in moves,
            clock=lambda: world.now,
            sleep=world.sleep,
        )
    assert world.passes == [1.0, 5.0, 6.0, 13.0]
