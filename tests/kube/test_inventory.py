"""The fleet inventory's bookkeeping (no API server): lists, watch events, malformed
objects, the synced flag, and the /readyz field; plus the adapters' plain parts."""

from __future__ import annotations

from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from tests.support import FLEET
from webhook import testing
from webhook.feed import IntensityFeed
from webhook.kube.client import Backoff, settings
from webhook.kube.inventory import FleetInventory
from webhook.kube.leader import LeaderElector
from webhook.model.config import parse
from webhook.serve.server import build_app
from webhook.serve.state import ServerState

CONFIG = parse({"clusters": {"member-fr": {"zone": "FR"}}})


def test_a_list_replaces_the_inventory_and_skips_malformed_clusters() -> None:
    fleet = FleetInventory(CONFIG)
    fleet.replace([testing.cluster("gone", region="eu-west-3")])
    fleet.replace(
        [
            testing.cluster("member-se", provider="aws", region="eu-north-1"),
            testing.cluster("member-fr"),
            testing.cluster("broken", provider="ibm", region="eu-de"),
        ]
    )
    got = {name: (e.grid_zone, e.zone_source) for name, e in fleet.clusters().items()}
    assert got == {"member-se": ("SE-SE3", "region-table"), "member-fr": ("FR", "config")}
    assert list(fleet.skipped()) == ["broken"]
    assert fleet.synced is False  # never listed from an API server


def test_watch_events_add_relabel_and_remove() -> None:
    fleet = FleetInventory(CONFIG)
    fleet.replace([])
    before = fleet.clusters()
    fleet.event("ADDED", testing.cluster("a", region="eu-north-1"))
    assert fleet.clusters()["a"].grid_zone == "SE-SE3"
    assert before == {}  # readers keep the snapshot they took
    fleet.event("MODIFIED", testing.cluster("a", zone="DE", region="eu-north-1"))
    assert (fleet.clusters()["a"].grid_zone, fleet.clusters()["a"].zone_source) == ("DE", "label")
    fleet.event("MODIFIED", testing.cluster("a", provider="nope"))  # became malformed: left out
    assert "a" not in fleet.clusters()
    assert "a" in fleet.skipped()
    fleet.event("MODIFIED", testing.cluster("a", region="eu-west-3"))
    assert fleet.clusters()["a"].grid_zone == "FR"
    assert fleet.skipped() == {}
    fleet.event("DELETED", testing.cluster("a", region="eu-west-3"))
    assert fleet.clusters() == {}


def test_backoff_grows_with_jitter_up_to_the_cap_and_resets() -> None:
    backoff = Backoff(base=1.0, cap=8.0)
    delays = [backoff.next() for _ in range(8)]
    assert 0.5 <= delays[0] <= 1.5
    assert all(d <= 12.0 for d in delays)
    assert delays[-1] >= 4.0
    backoff.reset()
    assert backoff.next() <= 1.5


def test_no_kubeconfig_and_no_cluster_means_no_connection(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert settings(None, default_namespace="carbonshift-system") is None
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "k"))
    monkeypatch.setenv("POD_NAME", "carbonshift-0")
    got = settings(None, default_namespace="carbonshift-system")
    assert got is not None
    assert (got.kubeconfig, got.namespace, got.identity) == (
        tmp_path / "k",
        "carbonshift-system",
        "carbonshift-0",
    )
    flag = settings(str(tmp_path / "f"), namespace="ops", default_namespace="x", lease="l")
    assert flag is not None
    assert (flag.kubeconfig, flag.namespace, flag.lease) == (tmp_path / "f", "ops", "l")


def test_elector_timings_must_nest_like_controller_runtime() -> None:
    with pytest.raises(ValueError, match="renew_deadline"):
        LeaderElector(None, "me", namespace="ns", lease_seconds=10, renew_deadline=10)  # type: ignore[arg-type]


async def test_readyz_reports_inventory_sync_without_depending_on_it() -> None:
    config = parse(FLEET)
    feed = IntensityFeed.from_config(config)
    await feed.refresh_once()
    state = ServerState(config=config, feed=feed, inventory=FleetInventory(config))
    async with TestClient(TestServer(build_app(state))) as http:
        resp = await http.get("/readyz")
        body = await resp.json()
    await feed.stop()
    assert resp.status == 200
    assert body["inventorySynced"] is False
    state.inventory = None
    async with TestClient(TestServer(build_app(state))) as http:
        body = await (await http.get("/readyz")).json()
    assert "inventorySynced" not in body


def test_a_status_only_change_keeps_the_snapshot_so_nothing_downstream_rebuilds() -> None:
    fleet = FleetInventory(CONFIG)
    fleet.replace([testing.cluster("a", region="eu-north-1")])
    view = fleet.clusters()
    beat = testing.cluster("a", region="eu-north-1") | {"status": {"kubernetesVersion": "v1.35.4"}}
    fleet.event("MODIFIED", beat)
    assert fleet.clusters() is view  # same snapshot: admission keeps its fleet generation
    fleet.event("MODIFIED", testing.cluster("a", labels={"tier": "prod"}, region="eu-north-1"))
    assert fleet.clusters() is not view


def test_a_room_change_is_counted_and_a_heartbeat_is_not() -> None:
    fleet = FleetInventory(CONFIG)

    def summary(allocated: str) -> dict[str, object]:
        room = {"allocatable": {"cpu": "8"}, "allocated": {"cpu": allocated}}
        return {"status": {"resourceSummary": room, "kubernetesVersion": "v1.35.4"}}

    fleet.replace([testing.cluster("a", region="eu-north-1") | summary("2")])
    listed = fleet.rooms
    view = fleet.clusters()
    fleet.event("MODIFIED", testing.cluster("a", region="eu-north-1") | summary("2"))
    assert fleet.rooms == listed  # the same room: nothing to look at again
    fleet.event("MODIFIED", testing.cluster("a", region="eu-north-1") | summary("6"))
    assert fleet.rooms == listed + 1
    assert fleet.clusters() is view  # room is the rebalancer's, not the placement's
