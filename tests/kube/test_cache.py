"""The one watched cache: decoded objects by name, replaced as a whole on each change."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.kube.cache import WatchedCache
from webhook.model.validation import InvalidInput


def _obj(name: str, zone: str | None, heartbeat: int = 0) -> dict[str, Any]:
    labels = {"zone": zone} if zone else {}
    return {"metadata": {"name": name, "labels": labels}, "status": {"beat": heartbeat}}


def _zone(obj: Mapping[str, Any], _previous: str | None) -> str:
    zone = obj["metadata"]["labels"].get("zone")
    if zone is None:
        raise InvalidInput("zone", "missing")
    return str(zone)


def _cache(seen: list[Mapping[str, str]]) -> WatchedCache[str]:
    return WatchedCache(("example.io", "v1", "things"), _zone, kind="thing", on_change=seen.append)


def test_a_list_replaces_everything_and_bad_objects_are_left_out() -> None:
    seen: list[Mapping[str, str]] = []
    cache = _cache(seen)
    cache.replace([_obj("a", "DE"), _obj("b", None)])
    assert dict(cache.items()) == {"a": "DE"}
    assert cache.skipped() == {"b": "zone: missing"}
    cache.replace([_obj("b", "FR")])
    assert dict(cache.items()) == {"b": "FR"}
    assert cache.skipped() == {}
    assert len(seen) == 2


def test_events_publish_a_new_view_only_when_the_decoded_value_changes() -> None:
    seen: list[Mapping[str, str]] = []
    cache = _cache(seen)
    cache.replace([_obj("a", "DE")])
    view = cache.items()
    cache.event("MODIFIED", _obj("a", "DE", heartbeat=1))  # a heartbeat
    assert cache.items() is view
    cache.event("MODIFIED", _obj("a", "PL"))
    assert cache.items() is not view
    assert dict(cache.items()) == {"a": "PL"}
    cache.event("ADDED", _obj("c", None))
    assert cache.skipped() == {"c": "zone: missing"}
    cache.event("DELETED", _obj("a", "PL"))
    cache.event("DELETED", _obj("c", None))
    assert dict(cache.items()) == {}
    assert cache.skipped() == {}
    assert [dict(v) for v in seen] == [{"a": "DE"}, {"a": "PL"}, {"a": "PL"}, {}, {}]
