"""A per-provider circuit breaker: stop calling a provider that keeps failing.

States: ``closed`` (calls pass), ``open`` (calls fail fast for ``reset_seconds``),
``half-open`` (one trial call; success closes, failure opens again). Only outage-like
failures count (timeouts, connection errors, 5xx, malformed bodies); a 401 or a 404 is
an answer, not an outage.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from enum import StrEnum

from webhook.runtime.metrics import CIRCUIT_STATE


class State(StrEnum):
    """Where the breaker is."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half-open"


class CircuitBreaker:
    """Counts consecutive failures of one provider and opens after ``failures`` of them."""

    def __init__(
        self,
        provider: str,
        *,
        failures: int = 5,
        reset_seconds: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.provider = provider
        self.failures = max(1, failures)
        self.reset_seconds = reset_seconds
        self._clock = clock
        self._count = 0
        self._opened_at = 0.0
        self._state = State.CLOSED
        self._trial_running = False
        CIRCUIT_STATE.labels(provider).set(0)

    @property
    def state(self) -> State:
        """Current state (an open breaker whose reset time passed reports half-open)."""
        if self._state is State.OPEN and self._clock() - self._opened_at >= self.reset_seconds:
            return State.HALF_OPEN
        return self._state

    def retry_in(self) -> float:
        """Seconds until an open breaker lets a trial call through (0 when not open)."""
        if self._state is not State.OPEN:
            return 0.0
        return max(0.0, self.reset_seconds - (self._clock() - self._opened_at))

    def allow(self) -> bool:
        """True if a call may go out now; claims the single half-open trial."""
        state = self.state
        if state is State.CLOSED:
            return True
        if state is State.HALF_OPEN and not self._trial_running:
            self._state = State.HALF_OPEN
            self._trial_running = True
            return True
        return False

    def abandon(self) -> None:
        """A call that was let through ended without a verdict (cancelled)."""
        self._trial_running = False

    def success(self) -> None:
        """Record an answer: closes the breaker."""
        self._count = 0
        self._trial_running = False
        if self._state is not State.CLOSED:
            self._state = State.CLOSED
            CIRCUIT_STATE.labels(self.provider).set(0)

    def failure(self) -> None:
        """Record an outage-like failure: opens after ``failures`` in a row."""
        self._count += 1
        self._trial_running = False
        if self._state is State.HALF_OPEN or self._count >= self.failures:
            self._state = State.OPEN
            self._opened_at = self._clock()
            CIRCUIT_STATE.labels(self.provider).set(1)
