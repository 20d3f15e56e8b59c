"""The list+watch loop against a small fake API server: resourceVersion and bookmarks,
re-list on 410 Gone, backoff with one warning per outage, RBAC 403 reported once; and
resourceVersion-checked updates retried on 409."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
import structlog
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio import client
from kubernetes_asyncio.client.rest import ApiException

from tests.support import eventually
from webhook.kube import client as kube_client
from webhook.kube.client import Backoff
from webhook.kube.inventory import FleetInventory
from webhook.kube.writes import NotLeader, update
from webhook.model.config import Config
from webhook.runtime import metrics

PATH = "/apis/cluster.karmada.io/v1alpha1/clusters"


def cluster(name: str, version: str) -> dict[str, Any]:
    return {
        "apiVersion": "cluster.karmada.io/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": name, "resourceVersion": version},
        "spec": {"syncMode": "Push", "region": "eu-west-3"},
    }


class FakeApiServer:
    """Answers lists from ``lists`` and watches from ``watches``, in order; records the
    query of every request."""

    def __init__(self) -> None:
        self.lists: list[tuple[int, Any]] = []
        self.watches: list[list[dict[str, Any]]] = []
        self.requests: list[dict[str, str]] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        query = dict(request.query)
        self.requests.append(query)
        if query.get("watch", "").lower() != "true":
            status, body = self.lists.pop(0) if self.lists else (200, self._empty("99"))
            return web.Response(status=status, body=orjson.dumps(body),
                                content_type="application/json")  # fmt: skip
        response = web.StreamResponse()
        await response.prepare(request)
        for event in self.watches.pop(0) if self.watches else []:
            await response.write(orjson.dumps(event) + b"\n")
        await asyncio.sleep(float(query.get("timeoutSeconds", "1")) if not self.watches else 0)
        return response

    @staticmethod
    def _empty(version: str, *items: dict[str, Any]) -> dict[str, Any]:
        return {"kind": "ClusterList", "metadata": {"resourceVersion": version},
                "items": list(items)}  # fmt: skip


@pytest.fixture
async def fake() -> AsyncIterator[tuple[FakeApiServer, client.ApiClient]]:
    server = FakeApiServer()
    app = web.Application()
    app.router.add_get(PATH, server.handle)
    async with TestServer(app) as http:
        api = client.ApiClient(client.Configuration(host=f"http://{http.host}:{http.port}"))
        try:
            yield server, api
        finally:
            await api.close()


def counter(metric: Any, *labels: str) -> float:
    value: float = metric.labels(*labels)._value.get()
    return value


def watching(server: FakeApiServer) -> list[dict[str, str]]:
    return [q for q in server.requests if q.get("watch", "").lower() == "true"]


async def test_bookmarks_move_the_version_and_410_relists(
    fake: tuple[FakeApiServer, client.ApiClient],
) -> None:
    server, api = fake
    server.lists = [
        (200, FakeApiServer._empty("10", cluster("a", "9"))),
        (200, FakeApiServer._empty("20", cluster("c", "19"))),
    ]
    server.watches = [
        [
            {"type": "BOOKMARK",
             "object": {"kind": "Cluster", "metadata": {"resourceVersion": "11"}}},
            {"type": "ADDED", "object": cluster("b", "12")},
            {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired",
                                         "message": "too old resource version"}},
        ],
    ]  # fmt: skip
    fleet = FleetInventory(Config())
    relists = counter(metrics.KUBE_RELISTS, "clusters.cluster.karmada.io")
    fleet.start(api, timeout_seconds=1)
    try:
        await eventually(
            lambda: set(fleet.clusters()) == {"c"} and len(watching(server)) == 2,
            "the re-list seen and watched again",
            seen=lambda: (fleet.clusters(), watching(server)),
        )
        assert fleet.synced
    finally:
        await fleet.stop()
    watches = watching(server)
    assert watches[0]["resourceVersion"] == "10"
    assert watches[0]["allowWatchBookmarks"].lower() == "true"
    assert watches[1]["resourceVersion"] == "20"  # after the re-list
    assert counter(metrics.KUBE_RELISTS, "clusters.cluster.karmada.io") - relists == 2


async def test_an_outage_warns_once_backs_off_keeps_state_and_recovers(
    fake: tuple[FakeApiServer, client.ApiClient],
) -> None:
    server, api = fake
    server.lists = [(200, FakeApiServer._empty("10", cluster("a", "9")))]
    fleet = FleetInventory(Config())
    fleet.start(api, timeout_seconds=1)
    assert fleet.cache._watch is not None
    fleet.cache._watch.backoff = Backoff(base=0.01, cap=0.05)
    try:
        await eventually(lambda: "a" in fleet.clusters(), "cluster a listed", seen=fleet.clusters)
        errors = counter(metrics.KUBE_ERRORS, "clusters.cluster.karmada.io", "500")
        failure = (500, {"kind": "Status", "code": 500, "message": "boom"})
        with structlog.testing.capture_logs() as logs:
            server.lists = [failure] * 4 + [(200, FakeApiServer._empty("30", cluster("a", "29")))]
            server.watches = [[{"type": "ERROR", "object": {"kind": "Status", "code": 500}}]]
            await eventually(lambda: not fleet.synced, "the outage seen")
            assert set(fleet.clusters()) == {"a"}  # the last state is kept
            await eventually(
                lambda: any(e["event"] == "kube_recovered" for e in logs),
                "the recovery",
                seen=logs.copy,
            )
            assert fleet.synced
        warnings = [e for e in logs if e["event"] == "kube_unreachable"]
        assert len(warnings) == 1
        assert [e["event"] for e in logs].count("kube_recovered") == 1
        assert counter(metrics.KUBE_ERRORS, "clusters.cluster.karmada.io", "500") - errors >= 4
    finally:
        await fleet.stop()


async def test_rbac_forbidden_is_one_error_naming_verb_and_resource(
    fake: tuple[FakeApiServer, client.ApiClient],
) -> None:
    server, api = fake
    denied = (403, {"kind": "Status", "code": 403, "reason": "Forbidden"})
    server.lists = [denied] * 5
    fleet = FleetInventory(Config())
    kube_client._refused.discard(("list", "clusters.cluster.karmada.io"))
    forbidden = counter(metrics.KUBE_FORBIDDEN, "list", "clusters.cluster.karmada.io")
    with structlog.testing.capture_logs() as logs:
        fleet.start(api, timeout_seconds=1)
        assert fleet.cache._watch is not None
        fleet.cache._watch.backoff = Backoff(base=0.01, cap=0.02)
        try:
            await eventually(
                lambda: not server.lists and fleet.synced,
                "every list answered and synced",
                seen=lambda: (len(server.lists), fleet.synced),
            )
        finally:
            await fleet.stop()
    errors = [e for e in logs if e["event"] == "kube_forbidden"]
    assert len(errors) == 1
    assert (errors[0]["verb"], errors[0]["resource"]) == ("list", "clusters.cluster.karmada.io")
    assert counter(metrics.KUBE_FORBIDDEN, "list", "clusters.cluster.karmada.io") - forbidden == 5


async def test_a_resource_not_served_is_empty_and_synced_and_listed_again(
    fake: tuple[FakeApiServer, client.ApiClient],
) -> None:
    """A cluster with Karpenter but no Karmada: the Cluster list answers 404. The
    inventory is synced and empty (readiness does not wait for Karmada), says so once at
    info level, and picks the Clusters up once the CRD is installed."""
    server, api = fake
    missing = (404, {"kind": "Status", "code": 404, "reason": "NotFound"})
    server.lists = [missing] * 3 + [(200, FakeApiServer._empty("5", cluster("a", "4")))]
    kube_client._absent.discard("clusters.cluster.karmada.io")
    fleet = FleetInventory(Config())
    with structlog.testing.capture_logs() as logs:
        fleet.start(api, timeout_seconds=1)
        assert fleet.cache._watch is not None
        fleet.cache._watch.absent_seconds = 0.05
        try:
            await eventually(lambda: fleet.synced, "synced")
            assert fleet.clusters() == {}
            await eventually(
                lambda: "a" in fleet.clusters(), "cluster a listed", seen=fleet.clusters
            )
        finally:
            await fleet.stop()
    events = [e["event"] for e in logs]
    assert events.count("kube_resource_absent") == 1
    assert "kube_unreachable" not in events


class Gate:
    def __init__(self, leading: bool) -> None:
        self.leading = leading


async def test_update_rereads_on_conflict_and_needs_the_lead() -> None:
    stored = {"metadata": {"resourceVersion": "1"}, "n": 0}
    writes: list[str] = []

    async def read() -> dict[str, Any]:
        return {"metadata": dict(stored["metadata"]), "n": stored["n"]}  # type: ignore[call-overload]

    async def write(obj: dict[str, Any]) -> dict[str, Any]:
        writes.append(obj["metadata"]["resourceVersion"])
        if len(writes) == 1:  # someone else wrote in between
            stored["metadata"] = {"resourceVersion": "2"}
            raise ApiException(status=409, reason="Conflict")
        return obj

    def bump(obj: dict[str, Any]) -> dict[str, Any]:
        return {**obj, "n": obj["n"] + 1}

    result = await update(read, bump, write, gate=Gate(True), resource="things")
    assert result is not None
    assert writes == ["1", "2"]
    with pytest.raises(NotLeader):
        await update(read, bump, write, gate=Gate(False), resource="things")
    assert await update(read, lambda _obj: None, write, gate=Gate(True), resource="x") is None


async def test_a_watch_whose_cleanup_fails_still_stops_when_cancelled() -> None:
    # kubernetes-asyncio's Watch closes its client on the way out of a cancelled read; an
    # error there must not read as a failed watch to retry, or the task outlives stop().
    from webhook.kube.watch import ListWatch  # noqa: PLC0415

    async with client.ApiClient() as api:
        follow = ListWatch(api, "example.io", "v1", "things", on_list=lambda _: None,
                           on_event=lambda *_: None)  # fmt: skip
        follow.resource_version = "1"  # listed: straight to the watch
        watching = asyncio.Event()

        async def hung_watch() -> None:
            watching.set()
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                raise RuntimeError("Session is closed") from None

        follow._watch = hung_watch  # type: ignore[method-assign]
        task = asyncio.create_task(follow.run())
        await asyncio.wait_for(watching.wait(), 10)
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=10)
        assert task in done, "the watch loop outlived its cancellation"
        assert task.cancelled()
