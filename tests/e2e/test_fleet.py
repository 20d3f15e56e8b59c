"""The fleet read from a real kube-apiserver with the real Karmada Cluster CRD: the
inventory follows Clusters as they are created, relabelled and removed; two leader
electors share one Lease; labels are written by server-side apply; Events are written;
``carbonshift serve`` with a kubeconfig reports ``inventorySynced``."""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from e2e_support import Kube, unique
from kubernetes_asyncio.client import ApiClient

from devtools.sandbox import Sandbox
from devtools.sandbox.layout import free_port
from webhook.decision.karmada.bindings import CLUSTERS
from webhook.kube.client import Settings, connect
from webhook.kube.events import REPORTING_CONTROLLER, EventRecorder
from webhook.kube.inventory import FleetInventory
from webhook.kube.leader import LeaderElector
from webhook.kube.writes import NotLeader, apply_metadata
from webhook.model import vocabulary
from webhook.model.config import Config, load
from webhook.runtime.tasks import closed

SECONDS = 10.0
"""How soon a change in the API server must show in the inventory."""


async def eventually(check: Callable[[], bool], timeout: float = SECONDS) -> float:  # noqa: ASYNC109
    """Wait until ``check()`` holds; returns the seconds it took."""
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < timeout, "condition not reached in time"
        await asyncio.sleep(0.1)
    return time.monotonic() - started


def karmada_cluster(name: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "cluster.karmada.io/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"syncMode": "Push", "apiEndpoint": "https://127.0.0.1:1", **spec},
    }


def settings(sandbox: Sandbox, identity: str = "e2e") -> Settings:
    return Settings(kubeconfig=sandbox.kubeconfig, namespace="default", identity=identity)


@pytest.fixture
async def api(sandbox: Sandbox) -> AsyncIterator[ApiClient]:
    client = await connect(settings(sandbox))
    try:
        yield client
    finally:
        await closed(client.close())


@pytest.fixture
async def inventory(sandbox: Sandbox, api: ApiClient) -> AsyncIterator[FleetInventory]:
    fleet = FleetInventory(load(sandbox.layout.carbonshift_config))
    fleet.start(api, timeout_seconds=30)
    try:
        await eventually(lambda: fleet.synced)
        yield fleet
    finally:
        await fleet.stop()


async def test_inventory_lists_clusters_with_their_zone_and_source(
    kube: Kube, inventory: FleetInventory
) -> None:
    name, broken = unique("fleet-aws"), unique("fleet-broken")
    kube.apply(karmada_cluster(name, provider="aws", region="eu-north-1", zones=["eu-north-1b"]))
    kube.apply(karmada_cluster(broken, provider="aws"))  # no region, no zone anywhere
    try:
        await eventually(lambda: name in inventory.clusters() and broken in inventory.skipped())
        got = inventory.clusters()[name]
        assert (got.grid_zone, got.zone_source) == ("SE-SE3", "region-table")
        assert (got.provider, got.region, got.zones, got.ready) == (
            "aws",
            "eu-north-1",
            ("eu-north-1b",),
            False,
        )
        demo = inventory.clusters()["member-fr"]  # the sandbox config has no clusters:
        assert (demo.grid_zone, demo.zone_source, demo.ready) == ("FR", "region-table", True)
        assert "spec.region" in inventory.skipped()[broken]
        assert broken not in inventory.clusters()
    finally:
        kube.ok("delete", "cluster.cluster.karmada.io", name, broken, "--wait=false")


async def test_add_relabel_and_remove_show_within_seconds(
    kube: Kube, inventory: FleetInventory
) -> None:
    name = unique("fleet-gcp")
    kube.apply(karmada_cluster(name, provider="gcp", region="europe-west9"))
    await eventually(lambda: name in inventory.clusters())
    assert inventory.clusters()[name].grid_zone == "FR"

    kube.ok("label", "cluster.cluster.karmada.io", name, f"{vocabulary.ZONE}=DE")
    await eventually(lambda: inventory.clusters()[name].grid_zone == "DE")
    assert inventory.clusters()[name].zone_source == "label"

    kube.ok("label", "cluster.cluster.karmada.io", name, f"{vocabulary.ZONE}-")
    await eventually(lambda: inventory.clusters()[name].zone_source == "region-table")

    kube.ok("delete", "cluster.cluster.karmada.io", name)
    await eventually(lambda: name not in inventory.clusters())
    assert inventory.synced


async def _electors(
    sandbox: Sandbox, lease: str, count: int
) -> tuple[list[ApiClient], list[LeaderElector]]:
    clients = [await connect(settings(sandbox, f"replica-{i}")) for i in range(count)]
    electors = [
        LeaderElector(c, f"replica-{i}", namespace="default", name=lease)
        for i, c in enumerate(clients)
    ]
    return clients, electors


async def _watch_exclusive(electors: list[LeaderElector], seconds: float) -> None:
    """Never two leaders at once, for ``seconds``."""
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        assert sum(e.leading for e in electors) <= 1
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("how", ["release", "cancel"])
async def test_two_electors_one_leads_and_the_other_takes_over(
    sandbox: Sandbox, kube: Kube, how: str
) -> None:
    lease = unique("carbonshift-leader")
    clients, electors = await _electors(sandbox, lease, 2)
    try:
        for elector in electors:
            elector.start()
        await eventually(lambda: any(e.leading for e in electors))
        await _watch_exclusive(electors, 3.0)
        (leader,) = [e for e in electors if e.leading]
        (other,) = [e for e in electors if not e.leading]
        stored = kube.get("lease.coordination.k8s.io", lease, "default")["spec"]
        assert stored["holderIdentity"] == leader.identity
        assert stored["leaseDurationSeconds"] == 15

        if how == "release":
            await leader.stop()
        else:  # a replica that dies without releasing: the Lease has to expire
            assert leader._task is not None
            leader._task.cancel()
            leader._leading = False
        assert not leader.leading  # stops writing at once
        took = await eventually(lambda: other.leading, timeout=20.0)
        if how == "release":
            assert took < 5.0
        stored = kube.get("lease.coordination.k8s.io", lease, "default")["spec"]
        assert stored["holderIdentity"] == other.identity
    finally:
        for elector in electors:
            await elector.stop()
        for c in clients:
            await closed(c.close())


async def test_labels_are_applied_by_the_leader_only_as_field_manager_carbonshift(
    sandbox: Sandbox, kube: Kube, api: ApiClient
) -> None:
    name = unique("fleet-ssa")
    kube.apply(karmada_cluster(name, {"team": "a"}, provider="aws", region="eu-west-3"))
    _, (elector,) = await _electors(sandbox, unique("carbonshift-leader"), 1)
    try:
        with pytest.raises(NotLeader):
            await apply_metadata(api, elector, CLUSTERS, name=name, labels={vocabulary.ZONE: "FR"})
        elector.start()
        await eventually(lambda: elector.leading)
        stored = await apply_metadata(
            api, elector, CLUSTERS, name=name, labels={vocabulary.ZONE: "FR"}
        )
        assert stored["metadata"]["labels"] == {"team": "a", vocabulary.ZONE: "FR"}
        managers = {m["manager"]: m["operation"] for m in stored["metadata"]["managedFields"]}
        assert managers["carbonshift"] == "Apply"
    finally:
        await elector.stop()
        await closed(elector.leases.api_client.close())
        kube.ok("delete", "cluster.cluster.karmada.io", name, "--wait=false")


async def test_events_about_a_cluster_are_written(kube: Kube, api: ApiClient) -> None:
    name = unique("fleet-events")
    cluster = json.loads(
        kube.ok(
            "apply",
            "-o",
            "json",
            "-f",
            "-",
            stdin=json.dumps(karmada_cluster(name, region="eu-west-3")),
        )
    )
    try:
        recorder = EventRecorder(api, "carbonshift-e2e")
        stored = await recorder.emit(
            cluster,
            reason="ZoneResolved",
            note="grid zone FR from the region table",
            action="Inventory",
        )
        assert stored is not None
        assert stored["metadata"]["namespace"] == "default"
        listed = json.loads(kube.ok("get", "events.events.k8s.io", "-n", "default", "-o", "json"))
        ours = [
            e for e in listed["items"]
            if e["regarding"].get("name") == name and e["reason"] == "ZoneResolved"
        ]  # fmt: skip
        assert len(ours) == 1
        assert ours[0]["reportingController"] == REPORTING_CONTROLLER
        assert ours[0]["reportingInstance"] == "carbonshift-e2e"
        assert ours[0]["regarding"]["kind"] == "Cluster"
    finally:
        kube.ok("delete", "cluster.cluster.karmada.io", name, "--wait=false")


async def test_serve_with_a_kubeconfig_reports_the_inventory_in_readyz(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    from webhook import app  # noqa: PLC0415

    stop = asyncio.Event()
    port = free_port()
    kube = Settings(sandbox.kubeconfig, "default", "serve-e2e", unique("carbonshift-leader"))
    task = asyncio.create_task(
        app.run(Config(), host="127.0.0.1", port=port, cert_dir=tmp_path, stop=stop, kube=kube)
    )
    body: dict[str, Any] = {}
    try:
        async with aiohttp.ClientSession() as session:
            started = time.monotonic()
            while not body.get("inventorySynced"):
                assert time.monotonic() - started < 20, body
                await asyncio.sleep(0.2)
                if task.done():
                    task.result()
                if not (tmp_path / "ca.crt").is_file():
                    continue
                context = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
                try:
                    async with session.get(f"https://127.0.0.1:{port}/readyz", ssl=context) as resp:
                        body = await resp.json()
                except aiohttp.ClientConnectionError:
                    continue
    finally:
        stop.set()
        await task
    assert body["inventorySynced"] is True
