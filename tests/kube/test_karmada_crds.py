"""What the Karmada policy API keeps, read from its CRDs through the real client against the
in-process API server (:mod:`tests.kubeapi`): each CRD listed and watched by name, the
answer in memory, an upgrade seen at once, a CRD not served left out, and the commands'
one-shot read."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from structlog.testing import capture_logs

from tests import kubeapi
from tests.decision.test_karmada_api import TERM_1_16, TERM_1_18, crd
from tests.support import FLEET, eventually
from webhook.decision.karmada.api import POLICY_CRDS, KarmadaApi
from webhook.feed import IntensityFeed
from webhook.kube import reads
from webhook.kube.karmada import KarmadaCrds
from webhook.model.config import parse
from webhook.runtime import metrics
from webhook.serve.server import build_app
from webhook.serve.state import ServerState

CRDS = "customresourcedefinitions"


def policy_crd(name: str, term: dict[str, Any]) -> dict[str, Any]:
    out = crd(term)
    out["metadata"]["name"] = name
    return out


@pytest.fixture
async def kube() -> AsyncIterator[kubeapi.KubeApi]:
    async with kubeapi.serve() as server:
        yield server


async def test_the_crds_are_followed_by_name_and_an_upgrade_is_seen(
    kube: kubeapi.KubeApi,
) -> None:
    for name in POLICY_CRDS:
        kube.add(policy_crd(name, TERM_1_16), CRDS)
    kube.add(policy_crd("widgets.example.io", TERM_1_18), CRDS)  # another CRD: not read
    crds = KarmadaCrds()
    assert crds.api() is None  # not listed yet: the config decides
    await crds.start(kube.api)  # returns once both were read
    try:
        assert crds.api() == KarmadaApi(False, "crd")
        assert set(crds.answers()) == set(POLICY_CRDS)
        assert metrics.KARMADA_OVERFLOW._value.get() == 0
        lists = kube.calls("GET", CRDS)
        assert {r.query.get("fieldSelector") for r in lists} == {
            f"metadata.name={n}" for n in POLICY_CRDS
        }
        for name in POLICY_CRDS:  # Karmada upgraded to 1.18: its CRDs replaced
            kube.touch(
                CRDS, name, change=lambda o: o.update(policy_crd(o["metadata"]["name"], TERM_1_18))
            )

        def upgraded() -> bool:
            return crds.api() == KarmadaApi(True, "crd")

        await eventually(upgraded, "the upgrade seen", seen=crds.answers)
        assert metrics.KARMADA_OVERFLOW._value.get() == 1
        await eventually(lambda: crds.synced, "following the watch")
    finally:
        await crds.stop()


async def test_without_karmadas_crds_the_config_decides(kube: kubeapi.KubeApi) -> None:
    kube.unserved.add("apiextensions.k8s.io")
    crds = KarmadaCrds()
    await crds.start(kube.api)  # both listed: not served, none
    try:
        assert crds.api() is None
    finally:
        await crds.stop()


async def test_an_api_server_too_slow_leaves_the_config_deciding(kube: kubeapi.KubeApi) -> None:
    kube.fail("GET", CRDS, 500, times=1000)  # every list fails: never read
    crds = KarmadaCrds()
    with capture_logs() as logs:
        await crds.start(kube.api, wait_seconds=0.05)
    try:
        assert crds.api() is None
        assert [e["event"] for e in logs if e["event"] == "karmada_api_not_read"]
    finally:
        await crds.stop()


async def test_the_commands_read_the_crds_once(kube: kubeapi.KubeApi) -> None:
    assert await reads.karmada_api(kube.api) is None  # none installed
    kube.add(policy_crd(POLICY_CRDS[0], TERM_1_18), CRDS)
    assert await reads.karmada_api(kube.api) == KarmadaApi(True, "crd")
    kube.add(policy_crd(POLICY_CRDS[1], TERM_1_16), CRDS)
    assert await reads.karmada_api(kube.api) == KarmadaApi(False, "crd")
    kube.unserved.add("apiextensions.k8s.io")
    assert await reads.karmada_api(kube.api) is None


async def test_the_decisions_and_readyz_follow_what_the_crds_say(kube: kubeapi.KubeApi) -> None:
    """Admission's context carries the CRDs' answer (its memo and the leader's held verdicts,
    keyed on the fleet generation, change with it); /readyz says which shape and why."""
    config = parse({**FLEET, "karmada": {"version": "1.18"}})
    feed = IntensityFeed.from_config(config)
    await feed.refresh_once()
    state = ServerState(config=config, feed=feed)
    offline = state.context()
    assert offline.karmada_api == KarmadaApi(True, "config", "1.18")
    for name in POLICY_CRDS:
        kube.add(policy_crd(name, TERM_1_16), CRDS)
    state.crds = KarmadaCrds()
    await state.crds.start(kube.api)
    try:
        read = state.context()
        assert read.karmada == KarmadaApi(False, "crd")  # the CRDs win over karmada.version
        assert read.fleet_generation != offline.fleet_generation
        assert state.context().fleet_generation == read.fleet_generation
        async with TestClient(TestServer(build_app(state))) as http:
            resp = await http.get("/readyz")
            body = await resp.json()
        assert resp.status == 200
        assert body["karmada"] == {
            "shape": "groups",
            "source": "crd",
            "why": "the policy CRDs lack overflowAffinities (Karmada before 1.18)",
        }
    finally:
        await state.crds.stop()
        await feed.stop()
