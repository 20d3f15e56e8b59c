"""How the process's cyclic garbage collector runs.

CPython collects its youngest generation every 700 net allocations of container objects
(dicts, lists, tuples) and the older ones every ten of the one below. The leader holds
what it follows in memory (a watched cache of every managed object and binding), and a
sync decides each object once, allocating a few hundred short-lived dicts per object: at
700 the collector runs tens of thousands of times in a sync and each older collection
walks what the caches hold. Measured on the 10,000-policy benchmark (`make bench
BENCH=reevaluate`, docs/benchmarks.md), the collector was a quarter of a first sync's CPU.

carbonshift's objects are freed by reference counting (its caches hold plain data, no
cycles), so the youngest generation is collected every :data:`YOUNG` allocations
instead: the same work, far fewer walks, a few megabytes more garbage at most (cycles
wait longer to be found). The app manager calls :func:`tune` once at start; the benchmark
that measures the leader runs under it too.
"""

from __future__ import annotations

import gc

YOUNG = 20_000
"""Net container allocations between two collections of the youngest generation (CPython's
default: 700). 5,000 to 20,000 measured alike on the first sync (3.0 to 3.1 s of CPU against
3.7 to 4.0 s); 100,000 no better."""


def tune() -> tuple[int, int, int]:
    """Set the collector's thresholds for a long-running carbonshift process; the thresholds
    in force before (to restore them)."""
    before = gc.get_threshold()
    _, middle, old = before
    gc.set_threshold(YOUNG, middle, old)
    return before
