"""The leader's AddOnPlacementScores against a fake API server: one ``carbon`` object per
ManagedCluster namespace with both scores and ``validUntil``, created by server-side apply;
rewritten only past the hysteresis margin; nothing written without the Lease, for a cluster
without a zone, or where OCM is not installed."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio import client

from tests.support import NOW, reading
from webhook.decision import ocm
from webhook.kinds.reevaluation import OutlookMethod
from webhook.kube.ocm import PlacementScorer
from webhook.model.config import parse
from webhook.model.intensity import IntensityTable
from webhook.model.vocabulary import ZONE


def managed(name: str, zone: str | None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {ZONE: zone} if zone else {}}}


@dataclasses.dataclass
class FakeApi:
    clusters: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    scores: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    """namespace -> the AddOnPlacementScore ``carbon``."""
    namespaces: set[str] = dataclasses.field(default_factory=set)
    installed: bool = True
    writes: list[tuple[str, str]] = dataclasses.field(default_factory=list)

    @staticmethod
    def _reply(body: object, status: int = 200) -> web.Response:
        return web.Response(status=status, body=orjson.dumps(body), content_type="application/json")

    def _missing(self) -> web.Response:
        return self._reply({"kind": "Status", "code": 404, "reason": "NotFound"}, 404)

    async def list(self, request: web.Request) -> web.Response:
        if not self.installed:
            return self._missing()
        plural = request.match_info["plural"]
        if plural == "managedclusters":
            return self._reply({"items": self.clusters})
        assert plural == "addonplacementscores"
        assert request.query.get("fieldSelector") == "metadata.name=carbon"
        return self._reply({"items": list(self.scores.values())})

    async def apply(self, request: web.Request) -> web.Response:
        assert request.content_type == "application/apply-patch+yaml"
        assert request.query.get("fieldManager") == "carbonshift"
        ns, name = request.match_info["ns"], request.match_info["name"]
        assert name == ocm.RESOURCE
        if ns not in self.namespaces:
            return self._missing()
        body = await request.json()
        sub = request.match_info.get("sub")
        self.writes.append((ns, sub or "object"))
        held = self.scores.setdefault(ns, {"metadata": {"name": name, "namespace": ns}})
        if sub == "status":
            held["status"] = body["status"]
        return self._reply(held)


class Gate:
    leading = True


@dataclasses.dataclass
class Feed:
    values: dict[str, float]
    ahead: dict[str, float] = dataclasses.field(default_factory=dict)
    wanted: set[str] = dataclasses.field(default_factory=set)

    @dataclasses.dataclass
    class _Snapshot:
        table: IntensityTable

    def snapshot(self) -> Feed._Snapshot:
        return self._Snapshot({z: reading(z, v) for z, v in self.values.items()})

    def want(self, zone: str) -> None:
        self.wanted.add(zone)

    def outlook(self, zone: str, horizon: int, method: OutlookMethod) -> list[float] | None:
        value = self.ahead.get(zone)
        return None if value is None else [value] * (horizon + 1)


@pytest.fixture
async def fake() -> AsyncIterator[tuple[FakeApi, client.ApiClient]]:
    state = FakeApi()
    app = web.Application()
    app.router.add_get("/apis/{group}/{version}/{plural}", state.list)
    base = "/apis/{group}/{version}/namespaces/{ns}/{plural}/{name}"
    app.router.add_patch(base, state.apply)
    app.router.add_patch(base + "/{sub}", state.apply)
    async with TestServer(app) as http:
        api = client.ApiClient(client.Configuration(host=f"http://{http.host}:{http.port}"))
        try:
            yield state, api
        finally:
            await api.close()


def scorer(api: client.ApiClient, feed: Feed, gate: Gate | None = None) -> PlacementScorer:
    config = parse({"hysteresis": {"margin": 0.1}, "ocm": {"interval_seconds": 30}})
    return PlacementScorer(api, config, feed, gate or Gate(), clock=lambda: NOW)


async def test_each_managed_cluster_gets_its_scores(fake: tuple[FakeApi, client.ApiClient]) -> None:
    state, api = fake
    state.clusters = [managed("green", "SE-SE3"), managed("dirty", "PL"), managed("nowhere", None)]
    state.namespaces = {"green", "dirty", "nowhere"}
    feed = Feed({"SE-SE3": 25.0, "PL": 800.0}, ahead={"PL": 500.0})
    assert await scorer(api, feed).pass_once() == 2
    assert feed.wanted == {"SE-SE3", "PL"}
    assert set(state.scores) == {"green", "dirty"}
    green, dirty = state.scores["green"]["status"], state.scores["dirty"]["status"]
    assert green["scores"] == [
        {"name": "forecast", "value": 95},
        {"name": "intensity", "value": 95},
    ]
    assert dirty["scores"] == [
        {"name": "forecast", "value": 0},
        {"name": "intensity", "value": -60},
    ]
    assert green["validUntil"] == "2026-01-01T15:00:00Z"  # the hour's end + feed.max_age_seconds
    assert ("green", "object") in state.writes


async def test_rewritten_only_beyond_the_margin(fake: tuple[FakeApi, client.ApiClient]) -> None:
    state, api = fake
    state.clusters = [managed("green", "SE-SE3")]
    state.namespaces = {"green"}
    feed = Feed({"SE-SE3": 200.0})
    leader = scorer(api, feed)
    assert await leader.pass_once() == 1
    feed.values["SE-SE3"] = 210.0  # +5 %: inside the margin
    assert await leader.pass_once() == 0
    assert state.scores["green"]["status"]["scores"][1] == {"name": "intensity", "value": 60}
    feed.values["SE-SE3"] = 600.0
    assert await leader.pass_once() == 1
    assert state.scores["green"]["status"]["scores"][1] == {"name": "intensity", "value": -20}


async def test_nothing_is_written_without_the_lease(fake: tuple[FakeApi, client.ApiClient]) -> None:
    state, api = fake
    state.clusters = [managed("green", "SE-SE3")]
    state.namespaces = {"green"}
    gate = Gate()
    gate.leading = False
    assert await scorer(api, Feed({"SE-SE3": 25.0}), gate).pass_once() == 0
    assert state.writes == []


async def test_a_missing_namespace_or_ocm_is_no_failure(
    fake: tuple[FakeApi, client.ApiClient],
) -> None:
    state, api = fake
    state.clusters = [managed("green", "SE-SE3")]
    feed = Feed({"SE-SE3": 25.0})
    assert await scorer(api, feed).pass_once() == 0  # no namespace "green"
    state.installed = False
    assert await scorer(api, feed).pass_once() == 0
    assert state.scores == {}


async def test_valid_until_is_renewed_before_it_lapses(
    fake: tuple[FakeApi, client.ApiClient],
) -> None:
    state, api = fake
    state.clusters = [managed("green", "SE-SE3")]
    state.namespaces = {"green"}
    feed = Feed({"SE-SE3": 25.0})
    now = [NOW]
    config = parse({"ocm": {"interval_seconds": 30}})
    leader = PlacementScorer(api, config, feed, Gate(), clock=lambda: now[0])
    assert await leader.pass_once() == 1
    now[0] += timedelta(hours=2, minutes=59)  # a minute before validUntil, same data
    assert await leader.pass_once() == 0
    later = reading("SE-SE3", 25.0, valid_from=NOW + timedelta(hours=2),
                    valid_to=NOW + timedelta(hours=3))  # fmt: skip
    feed.snapshot = lambda: Feed._Snapshot({"SE-SE3": later})  # type: ignore[method-assign]
    assert await leader.pass_once() == 1
    assert state.scores["green"]["status"]["validUntil"] == "2026-01-01T17:00:00Z"
