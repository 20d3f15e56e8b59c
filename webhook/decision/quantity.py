"""Kubernetes resource quantities (``"500m"``, ``"2"``, ``"1Gi"``) as exact decimals."""

from __future__ import annotations

import functools
import re
from decimal import Decimal, InvalidOperation

_SUFFIX = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$")


def quantity(text: object) -> Decimal | None:
    """A Kubernetes resource quantity (``"500m"``, ``"2"``, ``"1Gi"``); None when malformed."""
    if isinstance(text, bool):
        return None
    if isinstance(text, int | float):
        return Decimal(str(text))
    if not isinstance(text, str):
        return None
    return _cached(text) if len(text) <= CACHED_LENGTH else _parsed(text)


CACHED_LENGTH = 64
"""Longest quantity string kept in the memo (a real one is a few characters): the memo
holds 4,096 short strings at most, whatever an object sends."""


def _parsed(text: str) -> Decimal | None:
    """A quantity string's value."""
    match = _QUANTITY.match(text.strip())
    if match is None:
        return None
    try:
        return Decimal(match.group(1)) * _SUFFIX[match.group(2) or ""]
    except InvalidOperation:
        return None


_cached = functools.lru_cache(maxsize=4096)(_parsed)
""":func:`_parsed`, memoized (a fleet repeats a few strings many times)."""
