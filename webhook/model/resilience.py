"""How hard the intensity feed tries a provider: the defaults of the ``feed:`` section
(:class:`webhook.model.config.FeedConfig`) and of a provider built without one
(:class:`webhook.providers.http.HttpSettings`), owned here once. The bounds a
configured value must keep are the config's."""

from __future__ import annotations

TIMEOUT_SECONDS = 5.0
"""Total time for one HTTP request to a provider, connect to last byte."""
RETRIES = 2
"""Extra attempts after a timeout, connection error, 5xx or malformed body."""
BACKOFF_SECONDS = 0.5
"""Base of the jittered exponential backoff between attempts."""
BREAKER_FAILURES = 5
"""Consecutive failures that open a provider's circuit breaker."""
BREAKER_RESET_SECONDS = 60.0
"""How long an open circuit skips a provider before one trial call."""
