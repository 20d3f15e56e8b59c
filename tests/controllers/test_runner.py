"""The one periodic runner: passes while leading, hooks, failures survive, stop."""

from __future__ import annotations

from tests.support import eventually
from webhook.controllers.runner import Controller


class _Gate:
    leading = True


class _Counting(Controller):
    name = "counting"

    def __init__(self, gate: _Gate) -> None:
        self.gate = gate
        self.interval = 0.05
        self.tick = 0.01
        self.passes = 0
        self.failures = 0
        self.losses = 0

    async def reconcile(self) -> int:
        self.passes += 1
        if self.passes == 2:
            raise RuntimeError("one bad pass")
        return self.passes

    def failed(self) -> None:
        self.failures += 1
        super().failed()

    def lost(self) -> None:
        self.losses += 1


async def test_passes_run_while_leading_survive_a_failure_and_stop() -> None:
    gate = _Gate()
    loop = _Counting(gate)

    def counts() -> dict[str, int]:
        return {"passes": loop.passes, "failures": loop.failures, "losses": loop.losses}

    loop.start()
    assert loop.running
    await eventually(lambda: loop.passes >= 3, "a third pass", seen=counts)
    assert loop.passes >= 3  # the failed second pass did not end the loop
    assert loop.failures == 1
    gate.leading = False
    await eventually(lambda: loop.losses > 0, "the lost Lease noticed", seen=counts)
    stopped_at, lost_at = loop.passes, loop.losses
    # Ten more ticks without the Lease (counted, not timed: a busy machine ticks late).
    await eventually(lambda: loop.losses >= lost_at + 10, "ten ticks", seen=counts)
    assert loop.passes == stopped_at  # no pass without the Lease
    assert loop.losses > 0
    await loop.stop()
    assert not loop.running
