"""Reading provider JSON: msgspec structs for the shapes, plus timestamps and numbers.

Upstream bodies are untrusted. Each provider describes the fields it reads as frozen
msgspec structs (fields it does not read are ignored, as upstreams add them) and converts
the decoded body with :func:`decode`. Whatever does not fit raises :class:`ProviderError`
with a short message naming the endpoint and the field, never the body itself.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any, TypeVar

import msgspec

from webhook.model.errors import ProviderError
from webhook.model.validation import from_msgspec
from webhook.model.vocabulary import parse_time

T = TypeVar("T")


class Body(msgspec.Struct, frozen=True, gc=False):
    """Base of a provider's wire structs: immutable, unknown fields ignored. Subclasses
    repeat ``frozen=True, gc=False`` for type checkers."""


def malformed(provider: str, what: str, detail: str = "") -> ProviderError:
    """The error for a body that does not have the documented shape."""
    return ProviderError(
        provider, f"unexpected response from {what}{f' ({detail})' if detail else ''}"
    )


def decode(body: Any, kind: type[T], provider: str, what: str) -> T:
    """The JSON ``body`` (already parsed) as ``kind``. The error names the field at fault
    and the type it should have had; msgspec's type messages carry no values."""
    try:
        return msgspec.convert(body, kind, strict=True)
    except msgspec.ValidationError as exc:
        raise malformed(provider, what, str(from_msgspec(exc))) from None


def timestamp(value: str | None, provider: str, what: str) -> datetime:
    """An ISO-8601 timestamp (``Z``, an offset, or none meaning UTC) as aware UTC."""
    if not value:
        raise malformed(provider, what)
    try:
        return parse_time(value, provider=True)
    except ValueError:
        raise malformed(provider, what) from None


def number(value: float | None) -> float | None:
    """A finite non-negative number, or None for null and anything else."""
    if value is None or not math.isfinite(value) or value < 0:
        return None
    return value
