"""A small progress bar on stderr for long simulations."""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import TextIO


class Progress:
    """Counts steps towards ``total`` and redraws a one-line bar at most ~10 times a second.

    Disabled (``enabled=False``) it does nothing, so callers can always call
    :meth:`advance`.
    """

    def __init__(
        self, total: int, label: str, *, enabled: bool, stream: TextIO | None = None
    ) -> None:
        self.total = max(total, 1)
        self.label = label
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.done = 0
        self._started = time.monotonic()
        self._drawn = 0.0

    def advance(self, steps: int = 1) -> None:
        """Record ``steps`` more steps done."""
        self.done += steps
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._drawn >= 0.1 or self.done >= self.total:
            self._drawn = now
            self._draw(now)

    def _draw(self, now: float) -> None:
        width = 30
        frac = min(self.done / self.total, 1.0)
        bar = "#" * round(frac * width)
        elapsed = now - self._started
        self.stream.write(f"\r{self.label} [{bar:<{width}}] {frac * 100:5.1f}% {elapsed:5.1f}s")
        self.stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.enabled:
            self._draw(time.monotonic())
            self.stream.write("\n")
            self.stream.flush()
