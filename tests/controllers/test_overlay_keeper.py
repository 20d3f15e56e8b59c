"""The carbon price keeper lists its NodeOverlays only when it must: on a new term, after
a refused write, and once after a pass that wrote; otherwise it holds what it knows."""

from __future__ import annotations

import asyncio
import copy
from datetime import UTC, datetime, timedelta
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from webhook import kinds
from webhook.controllers.overlays import OverlayKeeper
from webhook.decision.karpenter.carbonprice import GROUP, RESOURCE
from webhook.model.config import parse
from webhook.model.intensity import Reading, Signal

NOW = datetime(2026, 11, 25, 12, tzinfo=UTC)
POOL = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodePool",
    "metadata": {"name": "default", "labels": {"carbonshift.io/enabled": "true"}},
    "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.kwok.sh"}}}},
}


class Leading:
    leading = True


class Api:
    """NodeOverlays in memory: lists counted, writes stored (a version each)."""

    def __init__(self) -> None:
        self.stored: dict[str, dict[str, Any]] = {}
        self.lists = self.writes = 0
        self.conflict = False

    async def list_cluster_custom_object(
        self, group: str, version: str, plural: str, **_: Any
    ) -> dict[str, Any]:
        assert (group, plural) == (GROUP, RESOURCE)
        self.lists += 1
        return {"items": [copy.deepcopy(o) for o in self.stored.values()]}

    def _store(self, body: dict[str, Any]) -> dict[str, Any]:
        if self.conflict:
            raise ApiException(status=409, reason="Conflict")
        self.writes += 1
        obj = copy.deepcopy(body)
        obj["metadata"]["resourceVersion"] = str(self.writes)
        self.stored[obj["metadata"]["name"]] = obj
        return copy.deepcopy(obj)

    async def create_cluster_custom_object(
        self, group: str, version: str, plural: str, body: dict[str, Any], **_: Any
    ) -> dict[str, Any]:
        return self._store(body)

    async def replace_cluster_custom_object(
        self, group: str, version: str, plural: str, name: str, body: dict[str, Any], **_: Any
    ) -> dict[str, Any]:
        return self._store(body)

    async def delete_cluster_custom_object(
        self, group: str, version: str, plural: str, name: str, **_: Any
    ) -> None:
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


def test_the_keeper_lists_only_when_it_must() -> None:
    async def run() -> None:
        ctx = _ctx(300.0)
        api = Api()
        async with client.ApiClient() as kube:
            keeper = OverlayKeeper(kube, ctx.config, Leading(), events=None)
        keeper.objects = api  # type: ignore[assignment]

        written = await keeper.keep([POOL], ctx)  # the first pass of a term lists
        assert written > 0
        assert (api.lists, api.writes) == (1, written)
        assert await keeper.keep([POOL], ctx) == 0  # reads Karpenter's verdict once
        assert api.lists == 2
        for _ in range(3):  # nothing to change: no call at all
            assert await keeper.keep([POOL], ctx) == 0
        assert (api.lists, api.writes) == (2, written)

        # The price moves: the held overlays are replaced at their stored versions.
        later = _ctx(600.0, NOW + timedelta(hours=2))
        assert await keeper.keep([POOL], later) == written
        assert api.lists == 2
        assert await keeper.keep([POOL], later) == 0
        assert api.lists == 3

        # A refused write (someone else wrote): the next pass lists again.
        api.conflict = True
        assert await keeper.keep([POOL], _ctx(50.0, NOW + timedelta(hours=4))) == 0
        api.conflict = False
        assert await keeper.keep([POOL], _ctx(50.0, NOW + timedelta(hours=4))) > 0
        assert api.lists == 4

        # A new term (leadership lost and won again) lists again.
        await keeper.keep([POOL], _ctx(50.0, NOW + timedelta(hours=4)))
        lists = api.lists
        keeper.forget()
        assert await keeper.keep([POOL], _ctx(50.0, NOW + timedelta(hours=4))) == 0
        assert api.lists == lists + 1

        # No priced pool left: every held overlay is deleted, then nothing is held.
        assert await keeper.keep([], _ctx(50.0, NOW + timedelta(hours=4))) == written
        assert api.stored == {}
        assert await keeper.keep([], _ctx(50.0, NOW + timedelta(hours=4))) == 0

    asyncio.run(run())
