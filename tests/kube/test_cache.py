"""The one watched cache: decoded objects by name, replaced as a whole on each change."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
import pytest

from tests import kubeapi
from webhook.kube import client as kube_client
from webhook.kube.cache import Head, WatchedCache
from webhook.model.resources import Resource
from webhook.model.validation import InvalidInput

THINGS = Resource("example.io", "v1", "things", "Thing")


def _obj(name: str, zone: str | None, heartbeat: int = 0) -> dict[str, Any]:
    labels = {"zone": zone} if zone else {}
    return {"metadata": {"name": name, "labels": labels}, "status": {"beat": heartbeat}}


def _zone(obj: Mapping[str, Any], _previous: str | None) -> str:
    zone = obj["metadata"]["labels"].get("zone")
    if zone is None:
        raise InvalidInput("zone", "missing")
    return str(zone)


def _cache(seen: list[Mapping[str, str]]) -> WatchedCache[str]:
    return WatchedCache(THINGS, _zone, kind="thing", on_change=seen.append)


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


def test_namespaced_objects_are_keyed_by_namespace_and_name_and_changed_keys_are_told() -> None:
    told: list[set[str]] = []
    cache: WatchedCache[str] = WatchedCache(
        THINGS, _zone, kind="thing", on_keys=lambda k: told.append(set(k))
    )

    def obj(namespace: str, name: str, zone: str | None, beat: int = 0) -> dict[str, Any]:
        made = _obj(name, zone, beat)
        made["metadata"]["namespace"] = namespace
        return made

    cache.replace([obj("a", "web", "DE"), obj("b", "web", "FR")])
    assert dict(cache.items()) == {"a/web": "DE", "b/web": "FR"}
    assert cache.get("b/web") == "FR"
    cache.event("MODIFIED", obj("a", "web", "DE", beat=1))  # a heartbeat: nobody told
    cache.event("MODIFIED", obj("a", "web", "PL"))
    cache.event("ADDED", obj("c", "web", None))  # left out: no value changed
    cache.event("DELETED", obj("b", "web", "FR"))
    cache.replace([obj("a", "web", "PL"), obj("d", "web", "SE")])  # the relist: d is new
    assert told == [{"a/web", "b/web"}, {"a/web"}, {"b/web"}, {"d/web"}]


def _zone_listed(data: memoryview, head: Head, _previous: str | None) -> str:
    zone = orjson.loads(data)["metadata"]["labels"].get("zone")
    if zone is None:
        raise InvalidInput("zone", "missing")
    return f"{zone} (listed, {head.key}, {len(head.annotations)} annotations)"


async def test_a_raw_decoder_reads_each_listed_object_from_its_json_page_by_page(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(kube_client, "LIST_PAGE", 2)
    async with kubeapi.serve() as kube:
        for name, zone in (("a", "DE"), ("b", None), ("c", "FR"), ("d", "PL"), ("e", "SE")):
            made = _obj(name, zone)
            made["apiVersion"], made["kind"] = THINGS.api_version, THINGS.kind
            made["metadata"] |= {"namespace": "web", "annotations": {"note": name}}
            kube.add(made)
        odd = kube.add({**made, "metadata": {"name": "f", "namespace": "web",
                                             "labels": {"zone": "NO"},
                                             "annotations": {"count": 3}}})  # fmt: skip
        cache = WatchedCache(THINGS, _zone, kind="thing", raw=_zone_listed)
        await cache.list_once(kube.api)
        lists = kube.calls("GET", THINGS.plural)
    assert dict(cache.items()) == {
        "web/a": "DE (listed, web/a, 1 annotations)",
        "web/c": "FR (listed, web/c, 1 annotations)",
        "web/d": "PL (listed, web/d, 1 annotations)",
        "web/e": "SE (listed, web/e, 1 annotations)",
        "web/f": "NO",  # its head is not the API's (an annotation not a string): parsed
    }, odd
    assert cache.skipped() == {"web/b": "zone: missing"}
    assert len(lists) == 3  # three pages of two
    cache.event(
        "MODIFIED",
        _obj("a", "PL") | {"metadata": {"name": "a", "namespace": "web", "labels": {"zone": "PL"}}},
    )
    assert cache.get("web/a") == "PL"  # a watch event is parsed: the plain decoder
