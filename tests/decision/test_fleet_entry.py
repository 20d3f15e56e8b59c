"""A Karmada Cluster object -> fleet inventory entry -> grid zone, and where it came from."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.decision.fleet import MAX_LABELS, entry, name_of, placement_clusters
from webhook.model import vocabulary
from webhook.model.config import Config, parse
from webhook.model.validation import InvalidInput

NO_CONFIG = Config()
CONFIG = parse({"clusters": {"member-cfg": {"zone": "FR"}, "member-both": {"zone": "PL"}}})


def cluster(
    name: str = "member-a",
    *,
    labels: Any = None,
    annotations: Any = None,
    status: Any = None,
    **spec: Any,
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "cluster.karmada.io/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
        "spec": {"syncMode": "Push", **spec},
    }
    if status is not None:
        obj["status"] = status
    return obj


def ready(value: str) -> dict[str, Any]:
    return {"conditions": [{"type": "Ready", "status": value, "reason": "r"}]}


def test_region_table_gives_the_zone_when_nothing_else_names_it() -> None:
    got = entry(
        cluster(provider="aws", region="eu-north-1", zones=["eu-north-1a"], status=ready("True")),
        NO_CONFIG,
    )
    assert (got.grid_zone, got.zone_source) == ("SE-SE3", "region-table")
    assert (got.name, got.provider, got.region, got.zones, got.ready) == (
        "member-a",
        "aws",
        "eu-north-1",
        ("eu-north-1a",),
        True,
    )


def test_label_wins_over_annotation_config_and_region_table() -> None:
    obj = cluster(
        "member-both",
        labels={vocabulary.ZONE: "DE"},
        annotations={vocabulary.ZONE: "NL"},
        provider="aws",
        region="eu-north-1",
    )
    got = entry(obj, CONFIG)
    assert (got.grid_zone, got.zone_source) == ("DE", "label")


def test_annotation_wins_over_config_and_region_table() -> None:
    obj = cluster("member-both", annotations={vocabulary.ZONE: "NL"}, region="eu-north-1")
    assert entry(obj, CONFIG).zone_source == "annotation"


def test_config_wins_over_region_table() -> None:
    got = entry(cluster("member-both", provider="aws", region="eu-north-1"), CONFIG)
    assert (got.grid_zone, got.zone_source) == ("PL", "config")


def test_config_names_the_zone_of_a_cluster_without_region() -> None:
    got = entry(cluster("member-cfg"), CONFIG)
    assert (got.grid_zone, got.zone_source) == ("FR", "config")


def test_label_names_the_zone_of_a_cluster_without_provider_or_region() -> None:
    got = entry(cluster(labels={vocabulary.ZONE: " SE-SE3 "}), NO_CONFIG)
    assert (got.grid_zone, got.zone_source) == ("SE-SE3", "label")


def test_malformed_zone_label_is_reported_and_the_next_source_used() -> None:
    got = entry(
        cluster(labels={vocabulary.ZONE: "not a zone!"}, provider="gcp", region="europe-west9"),
        NO_CONFIG,
    )
    assert (got.grid_zone, got.zone_source) == ("FR", "region-table")
    assert [p.path for p in got.problems] == ["metadata.labels.carbonshift.io/zone"]


def test_known_provider_with_a_region_the_table_lacks_is_unknown() -> None:
    got = entry(cluster(provider="aws", region="us-gov-west-1"), NO_CONFIG)
    assert (got.grid_zone, got.zone_source) == (None, "unknown")


def test_region_without_provider_is_looked_up_in_every_table() -> None:
    assert entry(cluster(region="swedencentral"), NO_CONFIG).grid_zone == "SE-SE3"


def test_legacy_spec_zone_is_read_when_zones_is_absent() -> None:
    assert entry(cluster(region="eu-west-3", zone="eu-west-3a"), NO_CONFIG).zones == ("eu-west-3a",)


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (None, False),
        (ready("True"), True),
        (ready("False"), False),
        (ready("Unknown"), False),
        ({"conditions": "nonsense"}, False),
        ("nonsense", False),
    ],
)
def test_ready_is_the_ready_condition_being_true(status: Any, expected: bool) -> None:
    obj = cluster(region="eu-west-3", status=status)
    assert entry(obj, NO_CONFIG).ready is expected


MALFORMED: list[tuple[Any, str]] = [
    (cluster(provider="aws"), "spec.region"),
    (cluster(provider="ibm", region="eu-de"), "spec.provider"),
    (cluster(labels={f"k{i}": "v" for i in range(MAX_LABELS + 1)}), "metadata.labels"),
    (cluster(labels={"big": "x" * 70_000}, region="eu-west-3"), "metadata.labels"),
    (cluster(labels={"k": 5}, region="eu-west-3"), "metadata.labels"),
    (cluster(labels=["a"], region="eu-west-3"), "metadata.labels"),
    (cluster(region=7), "spec.region"),
    (cluster(region="eu-west-3", zones="eu-west-3a"), "spec.zones"),
    (cluster(""), "metadata.name"),
    ({"kind": "Cluster"}, "metadata"),
    ({"metadata": {"name": "x"}, "spec": []}, "spec"),
    ("not an object", ""),
]


@pytest.mark.parametrize(("obj", "path"), MALFORMED)
def test_malformed_clusters_are_refused_naming_the_field(obj: Any, path: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        entry(obj, NO_CONFIG)
    assert caught.value.path == path


def test_unknown_provider_is_fine_when_the_zone_is_named() -> None:
    obj = cluster(labels={vocabulary.ZONE: "DE"}, provider="ibm", region="eu-de")
    assert entry(obj, NO_CONFIG).grid_zone == "DE"


def test_name_of_never_raises() -> None:
    assert name_of(cluster("x")) == "x"
    assert name_of("junk") == "?"
    assert name_of({"metadata": {"name": 3}}) == "?"


def test_zone_parser_names_the_key() -> None:
    assert vocabulary.zone(" US-CAL-CISO") == "US-CAL-CISO"
    with pytest.raises(InvalidInput) as caught:
        vocabulary.zone("DE/x")
    assert caught.value.path == vocabulary.ZONE


# --- inventory + config -> the clusters placement chooses among ---------------------------


def test_placement_clusters_take_the_cluster_objects_and_keep_config_only_members() -> None:
    found = {
        "member-both": entry(
            cluster("member-both", labels={"tier": "gold"}, provider="aws", region="eu-north-1"),
            CONFIG,
        ),
        "member-aws": entry(
            cluster("member-aws", provider="aws", region="eu-north-1", zones=["eu-north-1a"]),
            CONFIG,
        ),
    }
    merged = placement_clusters(found, CONFIG.clusters)
    assert list(merged) == ["member-aws", "member-both", "member-cfg"]
    assert merged["member-aws"].grid_zone == "SE-SE3"
    assert merged["member-aws"].zones == ("eu-north-1a",)
    assert merged["member-aws"].provider == "aws"
    assert merged["member-aws"].region == "eu-north-1"
    assert merged["member-both"].grid_zone == "PL"  # the config zone wins over the region table
    assert dict(merged["member-both"].labels) == {"tier": "gold"}  # what Karmada matches on
    assert merged["member-cfg"] is CONFIG.clusters["member-cfg"]  # config-only still counts


def test_placement_clusters_label_zone_wins_over_config() -> None:
    found = {"member-both": entry(cluster("member-both", labels={vocabulary.ZONE: "DE"}), CONFIG)}
    assert placement_clusters(found, CONFIG.clusters)["member-both"].grid_zone == "DE"


def test_placement_clusters_without_an_inventory_is_the_config() -> None:
    assert placement_clusters({}, CONFIG.clusters) == dict(CONFIG.clusters)


def test_unknown_zone_stays_unknown_in_placement() -> None:
    found = {"m": entry(cluster("m", provider="aws", region="mars-1"), NO_CONFIG)}
    assert placement_clusters(found, {})["m"].grid_zone is None
