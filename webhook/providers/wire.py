"""Parsing helpers for provider JSON: timestamps, numbers and shape errors.

Upstream bodies are untrusted. Every helper raises :class:`ProviderError` with a short
message (never the body itself) when a field is missing or has the wrong type.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from webhook.model.errors import ProviderError
from webhook.model.vocabulary import parse_time


def malformed(provider: str, what: str) -> ProviderError:
    """The error for a body that does not have the documented shape."""
    return ProviderError(provider, f"unexpected response from {what}")


def obj(value: Any, provider: str, what: str) -> Mapping[str, Any]:
    """``value`` as a JSON object."""
    if not isinstance(value, Mapping):
        raise malformed(provider, what)
    return value


def items(value: Any, provider: str, what: str) -> Sequence[Any]:
    """``value`` as a JSON array."""
    if not isinstance(value, list):
        raise malformed(provider, what)
    return value


def timestamp(value: Any, provider: str, what: str) -> datetime:
    """An ISO-8601 timestamp (``Z``, an offset, or none meaning UTC) as aware UTC."""
    if not isinstance(value, str) or not value:
        raise malformed(provider, what)
    try:
        return parse_time(value, provider=True)
    except ValueError:
        raise malformed(provider, what) from None


def number(value: Any) -> float | None:
    """A finite non-negative number, or None for null and anything else."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    result = float(value)
    if not math.isfinite(result) or result < 0:
        return None
    return result
