"""Config validation: every bad key gets a one-line error naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from webhook.config import Config, ConfigError, load, parse


def test_no_file_means_the_builtin_default() -> None:
    assert load(None) == Config()
    assert Config().providers == ("static",)


def test_a_full_file_parses(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "zone: DE\nclusters:\n  member-fr: {zone: FR}\n"
        "  member-ie: {provider: aws, region: eu-west-1}\n"
        "providers: [static]\nweighting: {exponent: 2, scale: 50}\n"
        "nodepools: {low_below: 100, high_from: 300, topology_zones: {eu-central-1a: DE}}\n"
        "service: {name: cs, namespace: ops}\nfeed: {refresh_seconds: 60}\n"
    )
    config = load(path)
    assert config.clusters["member-ie"].grid_zone == "IE"
    assert config.weighting.exponent == 2.0
    assert config.zones_in_use() == ("DE", "FR", "IE")
    assert "cs.ops.svc" in config.service.dns_names()


@pytest.mark.parametrize(
    ("doc", "key"),
    [
        ({"zon": "DE"}, "zon"),
        ({"zone": 5}, "zone"),
        ({"providers": ["electricmaps"]}, "providers[0]"),
        ({"providers": ["static", "static"]}, "providers[1]"),
        ({"providers": []}, "providers"),
        ({"clusters": {"m": {"zone": "FR", "color": "x"}}}, "clusters.m.color"),
        ({"clusters": {"m": {"region": "mars-1"}}}, "clusters.m"),
        ({"clusters": {"Bad_Name": {"zone": "FR"}}}, "clusters.Bad_Name"),
        ({"weighting": {"exponent": -1}}, "weighting.exponent"),
        ({"weighting": {"scale": 0}}, "weighting.scale"),
        ({"nodepools": {"low_below": 500, "high_from": 100}}, "nodepools.high_from"),
        ({"nodepools": {"mutate_on_update": "yes"}}, "nodepools.mutate_on_update"),
        ({"service": {"name": "Web Hook"}}, "service.name"),
        ({"feed": {"refresh_seconds": 0}}, "feed.refresh_seconds"),
        ([1, 2], "<root>"),
    ],
)
def test_bad_config_names_the_key(doc: object, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse(doc)
    assert info.value.key == key
    assert "\n" not in str(info.value)
    assert f"'{key}'" in str(info.value)


def test_unreadable_and_invalid_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("zone: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML at line"):
        load(bad)
