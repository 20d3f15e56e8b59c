"""Leader election against a fake Lease endpoint that checks resourceVersions like the API
server: one leader at a time, a leader that cannot renew stops leading by the renew
deadline, a released Lease is taken over at once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio import client

from tests.support import eventually
from webhook.kube.leader import LeaderElector
from webhook.runtime import metrics

LEASES = "/apis/coordination.k8s.io/v1/namespaces/ns/leases"


class FakeLeases:
    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.down = False

    def _reply(self, status: int, body: object) -> web.Response:
        return web.Response(status=status, body=orjson.dumps(body), content_type="application/json")

    def _status(self, code: int) -> web.Response:
        return self._reply(code, {"kind": "Status", "apiVersion": "v1", "code": code})

    def _store(self, body: dict[str, Any]) -> web.Response:
        self.version += 1
        body["metadata"]["resourceVersion"] = str(self.version)
        self.lease = body
        return self._reply(200, body)

    async def get(self, _request: web.Request) -> web.Response:
        if self.down:
            return self._status(500)
        return self._reply(200, self.lease) if self.lease else self._status(404)

    async def create(self, request: web.Request) -> web.Response:
        if self.down:
            return self._status(500)
        if self.lease:
            return self._status(409)
        return self._store(await request.json())

    async def replace(self, request: web.Request) -> web.Response:
        body = await request.json()
        if self.down:
            return self._status(500)
        assert self.lease is not None
        if body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
            return self._status(409)
        return self._store(body)


@pytest.fixture
async def leases() -> AsyncIterator[tuple[FakeLeases, list[client.ApiClient]]]:
    fake = FakeLeases()
    app = web.Application()
    app.router.add_get(LEASES + "/{name}", fake.get)
    app.router.add_put(LEASES + "/{name}", fake.replace)
    app.router.add_post(LEASES, fake.create)
    async with TestServer(app) as http:
        url = f"http://{http.host}:{http.port}"
        apis = [client.ApiClient(client.Configuration(host=url)) for _ in range(2)]
        try:
            yield fake, apis
        finally:
            for api in apis:
                await api.close()


def electors(apis: list[client.ApiClient]) -> list[LeaderElector]:
    return [
        LeaderElector(
            api, f"r{i}", namespace="ns", lease_seconds=1.5, renew_deadline=1.0, retry_period=0.2
        )
        for i, api in enumerate(apis)
    ]


async def test_one_leads_a_failing_leader_stops_and_a_released_lease_moves_at_once(
    leases: tuple[FakeLeases, list[client.ApiClient]],
) -> None:
    fake, apis = leases
    a, b = electors(apis)
    a.start()
    b.start()
    try:
        await eventually(lambda: a.leading or b.leading, "a leader", seconds=5.0)
        # Never both, over four renewals of the Lease (writes, not seconds: a busy
        # machine renews less often, and the check then covers as many renewals).
        renewed = fake.version + 4
        while fake.version < renewed:
            assert a.leading + b.leading == 1, (a.leading, b.leading, fake.version)
            await eventually(lambda: fake.version >= renewed or a.leading + b.leading != 1,
                             "a renewal", seconds=10.0, seen=lambda: fake.version)  # fmt: skip
        leader, other = (a, b) if a.leading else (b, a)
        assert fake.lease is not None
        assert fake.lease["spec"]["holderIdentity"] == leader.identity
        assert metrics.LEADER._value.get() == 1

        fake.down = True  # renewals fail: leadership ends by the renew deadline
        await eventually(lambda: not leader.leading, "leadership ended", seconds=1.1)
        fake.down = False

        await eventually(lambda: a.leading or b.leading, "a new leader", seconds=5.0)
        leader, other = (a, b) if a.leading else (b, a)
        await leader.stop()  # releases
        assert not leader.leading
        assert fake.lease["spec"]["holderIdentity"] is None
        # released: no waiting for it to expire
        await eventually(lambda: other.leading, "the other leading", seconds=1.0)
    finally:
        await a.stop()
        await b.stop()
