"""The carbon price keeper reads its NodeOverlays from the watched cache, never listing
them: what the API server answered to its writes counts until the watch delivers a newer
version, someone else's change is seen on the next pass, and a cache that cannot say
(not synced, the CRD not installed) leaves the pass alone."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests import kubeapi
from tests.support import eventually
from webhook import kinds
from webhook.controllers.karpenter import prices as overlays
from webhook.controllers.karpenter.prices import OverlayKeeper
from webhook.decision.karpenter.carbonprice import NODE_OVERLAY, SELECTOR
from webhook.kube.cache import WatchedCache
from webhook.model.config import parse
from webhook.model.intensity import Reading, Signal

Obj = dict[str, Any]
GROUP, VERSION, RESOURCE = NODE_OVERLAY.group, NODE_OVERLAY.version, NODE_OVERLAY.plural
NOW = datetime(2026, 11, 25, 12, tzinfo=UTC)
POOL = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodePool",
    "metadata": {"name": "default", "labels": {"carbonshift.io/enabled": "true"}},
    "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.kwok.sh"}}}},
}


class Leading:
    leading = True


class Told:
    """An Event recorder that keeps the reasons."""

    def __init__(self) -> None:
        self.reasons: list[str] = []

    async def emit(self, regarding: Mapping[str, Any], *, reason: str, **_: Any) -> None:
        self.reasons.append(reason)


class HandFed(WatchedCache[Obj]):
    """The overlays' cache, its watch played by the test (:meth:`deliver`)."""

    def __init__(self) -> None:
        super().__init__(NODE_OVERLAY, lambda o, _: dict(o), kind="node_overlay")
        self.watching = True

    @property
    def synced(self) -> bool:
        return self.watching

    def deliver(self, api: Api) -> None:
        """The watch catches up with what the API server stores."""
        self.replace(list(copy.deepcopy(api.stored).values()))


class Api:
    """NodeOverlays in memory: every call counted; a replace at a stale version is a 409."""

    def __init__(self) -> None:
        self.stored: dict[str, Obj] = {}
        self.lists = self.writes = 0
        self.version = 0

    async def list_cluster_custom_object(self, *_: Any, **__: Any) -> Obj:
        self.lists += 1
        return {"items": [copy.deepcopy(o) for o in self.stored.values()]}

    def store(self, body: Obj) -> Obj:
        self.version += 1
        obj = copy.deepcopy(body)
        obj["metadata"]["resourceVersion"] = str(self.version)
        self.stored[obj["metadata"]["name"]] = obj
        return copy.deepcopy(obj)

    async def create_cluster_custom_object(
        self, group: str, version: str, plural: str, body: Obj, **_: Any
    ) -> Obj:
        assert (group, plural) == (GROUP, RESOURCE)
        if body["metadata"]["name"] in self.stored:
            raise ApiException(status=409, reason="AlreadyExists")
        self.writes += 1
        return self.store(body)

    async def replace_cluster_custom_object(
        self, group: str, version: str, plural: str, name: str, body: Obj, **_: Any
    ) -> Obj:
        have = self.stored.get(name)
        if have is None or have["metadata"]["resourceVersion"] != (
            body["metadata"].get("resourceVersion")
        ):
            raise ApiException(status=409, reason="Conflict")
        self.writes += 1
        return self.store(body)

    async def delete_cluster_custom_object(
        self, group: str, version: str, plural: str, name: str, **_: Any
    ) -> None:
        self.writes += 1
        self.stored.pop(name)


def _ctx(value: float, now: datetime = NOW) -> kinds.Context:
    config = parse({"zone": "SE-SE3"})
    reading = Reading(
        zone="SE-SE3",
        value=value,
        signal=Signal.AVERAGE,
        valid_from=now - timedelta(minutes=5),
        valid_to=now + timedelta(minutes=55),
        estimated=False,
        source="test",
    )
    return kinds.Context(config=config, table={"SE-SE3": reading}, now=now, generation=1)


async def _keeper(
    kube: client.ApiClient, cache: WatchedCache[Obj] | None, told: Told | None = None
) -> OverlayKeeper:
    return OverlayKeeper(kube, _ctx(0).config, Leading(), events=told, cache=cache)  # type: ignore[arg-type]


def _refused(obj: Obj) -> None:
    obj["status"] = {
        "conditions": [
            {"type": "ValidationSucceeded", "status": "False", "reason": "Conflict", "message": "x"}
        ]
    }


async def test_the_answers_to_writes_count_until_the_watch_catches_up() -> None:
    ctx = _ctx(300.0)
    api, cache, told = Api(), HandFed(), Told()
    async with client.ApiClient() as kube:
        keeper = await _keeper(kube, cache, told)
    keeper.objects = api  # type: ignore[assignment]

    written = await keeper.keep([POOL], ctx)  # an empty synced cache: every overlay created
    assert written > 0
    assert (api.lists, api.writes) == (0, written)
    for _ in range(2):  # the watch has not delivered them yet: what was answered counts
        assert await keeper.keep([POOL], ctx) == 0
    assert api.writes == written

    # The price moves before the watch delivers: replaced at the answered versions.
    later = _ctx(600.0, NOW + timedelta(hours=2))
    assert await keeper.keep([POOL], later) == written
    assert api.writes == 2 * written
    cache.deliver(api)
    for _ in range(3):  # nothing to change: no call at all
        assert await keeper.keep([POOL], later) == 0
    assert (api.lists, api.writes) == (0, 2 * written)

    # Karpenter's verdict comes with the watch, and is told once.
    name = sorted(api.stored)[0]
    _refused(api.stored[name])
    api.store(api.stored[name])
    cache.deliver(api)
    assert await keeper.keep([POOL], later) == 0
    assert await keeper.keep([POOL], later) == 0
    assert told.reasons.count("CarbonPriceNotApplied") == 1

    # Someone else wrote, and the watch has not said so: the write is refused, nothing is
    # written until the watch delivers their version, then the price is written over it.
    moved = _ctx(50.0, NOW + timedelta(hours=4))
    api.store(api.stored[name])
    writes = api.writes
    assert await keeper.keep([POOL], moved) == written - 1
    cache.deliver(api)
    assert await keeper.keep([POOL], moved) == 1
    assert api.writes == writes + written

    # A new term reads the cache as the watch delivered it.
    keeper.forget()
    cache.deliver(api)
    assert await keeper.keep([POOL], moved) == 0

    # Not synced (the API server unreachable): the pass does nothing.
    cache.watching = False
    assert await keeper.keep([], moved) == 0
    assert api.writes == writes + written
    cache.watching = True

    # No priced pool left: every kept overlay is deleted, and stays deleted for the passes
    # before the watch delivers the deletions.
    assert await keeper.keep([], moved) == written
    assert api.stored == {}
    assert await keeper.keep([], moved) == 0
    cache.deliver(api)
    assert await keeper.keep([], moved) == 0
    assert api.lists == 0


async def test_no_cache_keeps_nothing() -> None:
    api = Api()
    async with client.ApiClient() as kube:
        keeper = await _keeper(kube, None)
    keeper.objects = api  # type: ignore[assignment]
    assert await keeper.keep([POOL], _ctx(300.0)) == 0
    assert (api.lists, api.writes) == (0, 0)


# --- through the wire: the cache follows the in-process API server's watch ---------------------


@pytest.fixture
async def kube() -> AsyncIterator[kubeapi.KubeApi]:
    async with kubeapi.serve() as server:
        yield server


@pytest.fixture
async def watched(kube: kubeapi.KubeApi) -> AsyncIterator[WatchedCache[Obj]]:
    cache = overlays.watched()
    cache.start(kube.api, timeout_seconds=5)
    try:
        await eventually(lambda: cache.synced, "the cache synced")
        yield cache
    finally:
        await cache.stop()


def _priced_by_hand(obj: Obj) -> None:
    obj["spec"].pop("priceAdjustment", None)
    obj["spec"]["price"] = "9.99"


def _lists(kube: kubeapi.KubeApi) -> list[kubeapi.Request]:
    return [
        r
        for r in kube.calls("GET", "nodeoverlays")
        if not r.where.name and r.query.get("watch", "").lower() != "true"
    ]


async def test_a_synced_cache_means_no_list_and_a_watched_change_is_seen_next_pass(
    kube: kubeapi.KubeApi, watched: WatchedCache[Obj]
) -> None:
    theirs = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "NodeOverlay",
        "metadata": {"name": "theirs"},
        "spec": {"weight": 10},
    }
    kube.add(theirs, RESOURCE)
    [listed] = _lists(kube)  # the cache's one list, by carbonshift's label
    assert listed.query["labelSelector"] == SELECTOR
    keeper = await _keeper(kube.api, watched)
    ctx = _ctx(300.0)

    written = await keeper.keep([POOL], ctx)
    assert written > 0
    await eventually(
        lambda: len(watched.items()) == written, "the writes watched", seen=watched.items
    )
    assert "theirs" not in watched.items()  # never read
    for _ in range(2):
        assert await keeper.keep([POOL], ctx) == 0
    assert len(_lists(kube)) == 1
    assert len(kube.writes()) == written

    # Someone else changes one overlay's price: the watch delivers it, the next pass puts
    # the carbon price back, replacing at their version (no conflict).
    name = sorted(watched.items())[0]
    changed = kube.touch(RESOURCE, name, change=_priced_by_hand)
    version = changed["metadata"]["resourceVersion"]
    await eventually(
        lambda: watched.items()[name]["metadata"]["resourceVersion"] == version,
        "the change watched",
        seen=lambda: watched.items()[name]["metadata"],
    )
    assert await keeper.keep([POOL], ctx) == 1
    [put] = kube.calls("PUT", "nodeoverlays")
    assert put.body["metadata"]["resourceVersion"] == version
    assert "price" not in kube.get(RESOURCE, name)["spec"]
    assert len(_lists(kube)) == 1
    assert kube.get(RESOURCE, "theirs")["spec"] == {"weight": 10}


async def test_overlays_not_served_leave_the_pass_alone(kube: kubeapi.KubeApi) -> None:
    kube.unserved.add("nodeoverlays")
    cache = overlays.watched()
    cache.start(kube.api, timeout_seconds=5)
    try:
        await eventually(lambda: cache.synced, "the cache synced")
        assert not cache.served
        keeper = await _keeper(kube.api, cache)
        assert await keeper.keep([POOL], _ctx(300.0)) == 0
        assert kube.writes() == []
    finally:
        await cache.stop()
