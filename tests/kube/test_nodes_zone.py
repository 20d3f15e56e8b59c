"""The local grid zone from the cluster's own Nodes (pure resolution)."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.kube.nodes import NodeZones, provider_of, resolve

REGION = "topology.kubernetes.io/region"


def node(region: str | None, provider_id: str | None = None, **labels: str) -> dict[str, Any]:
    meta_labels = {**labels, **({REGION: region} if region else {})}
    return {"metadata": {"labels": meta_labels}, "spec": {"providerID": provider_id}}


def test_aws_eu_north_1_is_se_se3_with_no_zone_in_the_config() -> None:
    got = resolve([node("eu-north-1", "aws:///eu-north-1a/i-0abc")] * 3, None)
    assert (got.zone, got.source) == ("SE-SE3", "node-region")
    assert got.detail == "3 of 3 nodes"


@pytest.mark.parametrize(
    ("region", "provider_id", "zone"),
    [
        ("europe-west4", "gce://proj/europe-west4-a/vm-1", "NL"),
        ("westeurope", "azure:///subscriptions/x/virtualMachines/vm", "NL"),
        ("eu-central-1", "aws:///eu-central-1b/i-1", "DE"),
        ("us-central1", None, "US-CENT-SWPP"),  # no provider: region names do not collide
    ],
)
def test_gcp_azure_and_providerless_regions(
    region: str, provider_id: str | None, zone: str
) -> None:
    assert resolve([node(region, provider_id)], "DE").zone == zone


def test_the_nodes_win_over_the_config_and_the_config_is_the_fallback() -> None:
    assert resolve([node("eu-north-1", "aws:///x/i")], "DE").zone == "SE-SE3"
    got = resolve([node("moon-1", "aws:///x/i")], "DE")
    assert (got.zone, got.source) == ("DE", "config")


def test_unknown_means_no_zone_and_says_why() -> None:
    got = resolve([node("moon-1", "kwok://fake"), node(None)], None)
    assert got.zone is None
    assert got.source == "unknown"
    assert "?/moon-1" in got.detail
    assert "config zone is not set" in got.detail
    assert resolve([], None).readiness()["zone"] is None


def test_a_grid_zone_label_names_the_zone_and_majorities_win() -> None:
    labelled = node("eu-north-1", "aws:///x/i", **{"carbonshift.io/grid-zone": "FR"})
    got = resolve([labelled, labelled, node("eu-north-1", "aws:///x/i")], None)
    assert (got.zone, got.source) == ("FR", "node-label")
    assert "other nodes say SE-SE3 (1)" in got.detail


@pytest.mark.parametrize(
    ("provider_id", "provider"),
    [("aws:///eu-north-1a/i-0", "aws"), ("gce://p/z/n", "gcp"), ("azure:///s", "azure"),
     ("kwok://n", None), ("", None), (None, None)],
)  # fmt: skip
def test_provider_from_the_provider_id(provider_id: str | None, provider: str | None) -> None:
    assert provider_of(provider_id) == provider


def test_node_zones_follow_each_list() -> None:
    zones = NodeZones(None)
    assert zones.current.zone is None
    zones.update([node("eu-north-1", "aws:///x/i")])
    assert zones.current.zone == "SE-SE3"


def test_nodepools_are_classed_by_the_nodes_zone_with_no_zone_in_the_config() -> None:
    from datetime import UTC, datetime  # noqa: PLC0415

    from tests.support import reading  # noqa: PLC0415
    from webhook import kinds  # noqa: PLC0415
    from webhook.model.config import Config  # noqa: PLC0415

    row = kinds.find("karpenter.sh", "NodePool")
    assert row is not None
    pool = {"metadata": {"name": "p"}, "spec": {"template": {"spec": {}}}}
    table = {"SE-SE3": reading("SE-SE3", 30.0)}
    now = datetime(2026, 3, 1, tzinfo=UTC)
    local = resolve([node("eu-north-1", "aws:///eu-north-1a/i-0")], None).zone
    decided = row.decide(pool, kinds.Context(Config(), table, now, local=local))
    assert decided.record is not None
    assert decided.record.body["zone"] == "SE-SE3"
    assert row.decide(pool, kinds.Context(Config(), table, now)).skipped


def test_a_limited_pools_warning_names_the_clusters_other_nodepools() -> None:
    from datetime import UTC, datetime  # noqa: PLC0415

    from tests.support import reading  # noqa: PLC0415
    from webhook import kinds  # noqa: PLC0415
    from webhook.model.config import Config  # noqa: PLC0415

    row = kinds.find("karpenter.sh", "NodePool")
    assert row is not None
    pool = {
        "metadata": {"name": "batch", "annotations": {"carbonshift.io/strategy": "pause"}},
        "spec": {"template": {"spec": {}}, "limits": {"cpu": "10"}},
    }
    table = {"DE": reading("DE", 700.0)}
    now = datetime(2026, 3, 1, tzinfo=UTC)
    known = kinds.Context(Config(zone="DE"), table, now, nodepools=("batch", "web", "gpu"))
    warnings = row.decide(pool, known).warnings
    assert any("urgent pods can land on NodePools gpu, web" in w for w in warnings), warnings
    unknown = row.decide(pool, kinds.Context(Config(zone="DE"), table, now)).warnings
    assert any("carbonshift knows no other NodePool" in w for w in unknown), unknown
