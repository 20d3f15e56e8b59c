"""The ledger of ``carbonshift report --input FILE``, checked key by key.

The leader starts afresh from what it cannot read
(:meth:`webhook.decision.ledger.Ledger.from_data`); a file handed to the report is refused
instead, naming the first key that is wrong, so that a broken copy never reads as "no
accounting yet" or as a row of zeros."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import orjson

from webhook.model.vocabulary import parse_time

SIGNALS = ("average", "marginal")
METHODS = ("coefficient", "kepler")
TOTALS_NUMBERS = ("kwh", "grams", "counterfactual_grams", "embodied_grams", "hours")
PLACE_NUMBERS = ("kwh", "g", "cf_g", "rh")


class InputProblem(ValueError):
    """One key of the input is wrong: ``key: message`` (the whole file: ``message``)."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}" if key else message)


def _shown(value: object) -> str:
    return orjson.dumps(value).decode() if _jsonable(value) else repr(value)


def _jsonable(value: object) -> bool:
    try:
        orjson.dumps(value)
    except TypeError:
        return False
    return True


def _json(data: Mapping[str, str], name: str) -> Any:
    key = f'ledger["{name}"]'
    try:
        return orjson.loads(data[name])
    except orjson.JSONDecodeError as exc:
        raise InputProblem(key, f"not JSON text: {exc}") from None


def _object(value: object, key: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InputProblem(key, f"expected an object, got {_shown(value)}")
    return value


def _number(value: object, key: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InputProblem(key, f"expected a number, got {_shown(value)}")


def _time(value: object, key: str) -> None:
    try:
        parse_time(str(value))
    except ValueError:
        raise InputProblem(key, f"expected a time (RFC 3339), got {_shown(value)}") from None


def _meta(doc: object) -> None:
    meta = _object(doc, 'ledger["meta.json"]')
    for field in ("since", "last"):
        if meta.get(field) is not None:
            _time(meta[field], f'ledger["meta.json"].{field}')


def _totals(doc: object) -> None:
    where = 'ledger["totals.json"]'
    for name, held in _object(doc, where).items():
        at = f'{where}["{name}"]'
        if len(name.split("/")) != 3:
            raise InputProblem(at, "expected a key Kind/namespace/name (NodePool//name)")
        sums = _object(held, at)
        for label, entry in _object(sums.get("totals", {}), f"{at}.totals").items():
            here = f'{at}.totals["{label}"]'
            totals = _object(entry, here)
            signal, method = totals.get("signal"), totals.get("method")
            if signal is not None and signal not in SIGNALS:
                raise InputProblem(f"{here}.signal", f"expected average or marginal, got "
                                   f"{_shown(signal)}")  # fmt: skip
            if method is not None and method not in METHODS:
                raise InputProblem(f"{here}.method", f"expected coefficient or kepler, got "
                                   f"{_shown(method)}")  # fmt: skip
            for field in TOTALS_NUMBERS:
                if totals.get(field) is not None:
                    _number(totals[field], f"{here}.{field}")
        for place, numbers in _object(sums.get("places", {}), f"{at}.places").items():
            here = f'{at}.places["{place}"]'
            for field, value in _object(numbers, here).items():
                _number(value, f"{here}.{field}")


def _series(doc: object) -> None:
    where = 'ledger["series.json"]'
    if not isinstance(doc, list):
        raise InputProblem(where, f"expected a list of hourly points, got {_shown(doc)}")
    for index, entry in enumerate(doc):
        at = f"{where}[{index}]"
        point = _object(entry, at)
        _time(point.get("t"), f"{at}.t")
        for part in ("i", "r", "g", "c"):
            for name, value in _object(point.get(part, {}), f"{at}.{part}").items():
                _number(value, f'{at}.{part}["{name}"]')


def check_ledger(data: Mapping[str, str]) -> None:
    """Refuse a ledger (a ConfigMap's ``data``) the report would misread: the first wrong
    key, as :class:`InputProblem` (``ledger["totals.json"]["Kind/ns/name"].totals
    ["average/coefficient"].kwh: expected a number, got "ten"``)."""
    for name, check in (("meta.json", _meta), ("totals.json", _totals), ("series.json", _series)):
        if name in data:
            check(_json(data, name))
