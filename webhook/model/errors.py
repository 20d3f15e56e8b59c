"""Every exception carbonshift raises, in one small hierarchy.

::

    CarbonshiftError
    ├── InvalidInput (ValueError)        input that does not fit its schema: HTTP 400, exit 2
    ├── SelectorError (ValueError)       a malformed selector in a policy
    ├── TraceError (ValueError)          a trace file that cannot be read
    ├── ProviderError                    a provider gave no reading
    │   ├── ZoneNotSupported
    │   ├── AuthenticationFailed
    │   ├── RateLimited
    │   ├── IncomparableSignal
    │   └── CircuitOpen
    ├── AccountingError (ValueError)     a carbon figure that cannot be computed honestly
    │   └── MixedSignals                 figures of different signals or methods added up
    ├── QueryError (RuntimeError)        Prometheus unreachable, or it refused a query
    ├── NotLeader (RuntimeError)         a write asked for on a replica that does not lead
    ├── ReportUnavailable (RuntimeError) the simulator's report needs matplotlib
    ├── UsageError                       a command called the wrong way
    └── ListenError                      the server cannot listen on its address

The built-in bases (``ValueError``, ``RuntimeError``) stay where callers already catch
them. This module imports nothing of carbonshift, so every layer may raise from it.
"""

from __future__ import annotations


class CarbonshiftError(Exception):
    """Base of every carbonshift exception."""


class InvalidInput(CarbonshiftError, ValueError):
    """Input that does not fit its schema. ``path`` is the field (empty: the whole input),
    written as a person would (``feed.retries``, ``clusters[0].name``); every HTTP
    endpoint answers it with 400 and ``{"error": "<path>: <message>"}``."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}" if path else message)

    def within(self, prefix: str) -> InvalidInput:
        """The same error with its path under ``prefix`` (e.g. a provider's section)."""
        return InvalidInput(join(prefix, self.path), self.message)


def join(prefix: str, path: str) -> str:
    """``prefix`` and ``path`` as one dotted path (list indexes stay ``[i]``)."""
    if not prefix:
        return path
    if not path:
        return prefix
    return f"{prefix}{path}" if path.startswith("[") else f"{prefix}.{path}"


class SelectorError(CarbonshiftError, ValueError):
    """A selector in the object is malformed."""


class TraceError(CarbonshiftError, ValueError):
    """A trace file is missing, unreadable or not in the expected format."""


class ProviderError(CarbonshiftError):
    """A provider could not produce a reading. The message never contains secrets."""

    def __init__(self, provider: str, message: str) -> None:
        super().__init__(f"{provider}: {message}")
        self.provider = provider


class ZoneNotSupported(ProviderError):
    """The provider has no data for this zone; the next provider in the chain should answer."""


class AuthenticationFailed(ProviderError):
    """The provider refused the credentials (HTTP 401/403). ``status`` is the HTTP code."""

    def __init__(self, provider: str, message: str, status: int | None = None) -> None:
        super().__init__(provider, message)
        self.status = status


class RateLimited(ProviderError):
    """The provider asked us to slow down (HTTP 429)."""

    def __init__(self, provider: str, message: str, retry_after: float | None = None) -> None:
        super().__init__(provider, message)
        self.retry_after = retry_after


class IncomparableSignal(ProviderError):
    """The provider only has a relative signal (e.g. a percentile) for this zone."""


class CircuitOpen(ProviderError):
    """The provider's circuit breaker is open: no request was made."""


class AccountingError(CarbonshiftError, ValueError):
    """A figure that cannot be computed honestly."""


class MixedSignals(AccountingError):
    """Figures of different signals (average, marginal) or methods were to be added."""


class QueryError(CarbonshiftError, RuntimeError):
    """Prometheus could not be reached or refused the query."""


class NotLeader(CarbonshiftError, RuntimeError):
    """A write was asked for while this replica does not hold the leader Lease."""


class ReportUnavailable(CarbonshiftError, RuntimeError):
    """The HTML report cannot be written because matplotlib is not installed."""


class UsageError(CarbonshiftError):
    """A mistake in how the command was called; printed on one line, exit status 2."""


class ListenError(CarbonshiftError):
    """The server cannot listen on its address (a busy port, no permission): one line for
    the operator, exit status 1."""
