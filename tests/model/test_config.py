"""Config validation: every bad key gets a one-line error naming its path."""

from __future__ import annotations

from pathlib import Path

import pytest

from webhook.model.config import Config, load, parse
from webhook.model.validation import InvalidInput


def test_no_file_means_the_builtin_default() -> None:
    assert load(None) == Config()
    assert Config().providers == ("static",)


def test_a_full_file_parses(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "zone: DE\nclusters:\n  member-fr: {zone: FR}\n"
        "  member-ie: {provider: aws, region: eu-west-1, labels: {tier: prod}}\n"
        "providers: [static]\nweighting: {exponent: 2, scale: 50}\n"
        "nodepools: {low_below: 100, high_from: 300, topology_zones: {eu-central-1a: DE}}\n"
        "service: {name: cs, namespace: ops}\nfeed: {refresh_seconds: 60}\n"
    )
    config = load(path)
    assert config.clusters["member-ie"].grid_zone == "IE"
    assert config.clusters["member-ie"].name == "member-ie"
    assert config.clusters["member-ie"].labels == {"tier": "prod"}
    assert config.weighting.exponent == 2.0
    assert config.feed.refresh_seconds == 60.0
    assert config.zones_in_use() == ("DE", "FR", "IE")
    assert "cs.ops.svc" in config.service.dns_names()


def test_provider_sections_are_kept_as_options() -> None:
    config = parse({"providers": "static", "ukgrid": {"retries": 1}, "trace": None})
    assert config.providers == ("static",)
    assert config.provider_options == {"ukgrid": {"retries": 1}, "trace": {}}


def test_an_empty_file_is_the_default(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text("# nothing set\n")
    assert load(tmp_path / "c.yaml") == Config()


BAD_CONFIGS = [
    # top level
    ([1, 2], "", "expected mapping, got list"),
    ({"zon": "DE"}, "zon", "unknown key (known: "),
    ({"zone": 5}, "zone", "expected str | null, got int"),
    ({"zone": "not a zone"}, "zone", "expected a grid zone key such as DE or US-CAL-CISO"),
    ({"provider_options": {}}, "provider_options", "unknown key (known: "),
    ({1: "x"}, "1", "invalid key: expected str, got int"),
    # providers and provider sections
    ({"providers": ["electricmaps"]}, "providers[0]", "unknown provider 'electricmaps'"),
    ({"providers": ["static", "static"]}, "providers[1]", "'static' is listed twice"),
    ({"providers": []}, "providers", "expected list of length >= 1, got []"),
    ({"providers": 3}, "providers", "expected list, got int"),
    ({"trace": [1]}, "trace", "expected mapping, got list"),
    ({"static": {"x": 1}}, "static.x", "static takes no options"),
    ({"ukgrid": {"retries": -1}}, "ukgrid.retries", "expected int >= 0, got -1"),
    # clusters
    ({"clusters": []}, "clusters", "expected mapping, got list"),
    ({"clusters": {"m": None}}, "clusters.m", "expected mapping, got null"),
    ({"clusters": {"m": {"zone": "FR", "color": "x"}}}, "clusters.m.color", "unknown key (known: "),
    ({"clusters": {"m": {"zone": "FR", "name": "n"}}}, "clusters.m.name", "unknown field"),
    ({"clusters": {"m": {"region": "mars-1"}}}, "clusters.m", "no grid zone"),
    ({"clusters": {"Bad_Name": {"zone": "FR"}}}, "clusters.Bad_Name", "invalid key: expected a"),
    ({"clusters": {"m": {"zone": "F R"}}}, "clusters.m.zone", "got 'F R'"),
    ({"clusters": {"m": {"zone": "FR", "zones": "a"}}}, "clusters.m.zones", "expected list"),
    ({"clusters": {"m": {"zone": "FR", "provider": ""}}}, "clusters.m.provider", "length >= 1"),
    (
        {"clusters": {"ok": {"zone": "FR"}, "m": {"zone": "FR", "labels": {"tier": 1}}}},
        "clusters.m.labels.tier",
        "expected str, got int",
    ),
    # weighting
    ({"weighting": {"exponent": -1}}, "weighting.exponent", "expected float >= 0.0, got -1"),
    ({"weighting": {"exponent": 9}}, "weighting.exponent", "expected float <= 8.0, got 9"),
    ({"weighting": {"scale": 0}}, "weighting.scale", "expected int >= 1, got 0"),
    ({"weighting": {"scale": 1.5}}, "weighting.scale", "expected int, got float"),
    ({"weighting": {"sharpness": 1}}, "weighting.sharpness", "unknown key (known: "),
    # hysteresis
    ({"hysteresis": {"margin": 1}}, "hysteresis.margin", "expected float < 1.0, got 1"),
    ({"hysteresis": {"dwell_hours": "12h"}}, "hysteresis.dwell_hours", "expected float, got str"),
    ({"hysteresis": {"dwell": 1}}, "hysteresis.dwell", "unknown key (known: "),
    # nodepools
    ({"nodepools": {"low_below": 500, "high_from": 100}}, "nodepools.high_from", ">= low_below"),
    ({"nodepools": {"low_below": -1}}, "nodepools.low_below", "expected float >= 0.0, got -1"),
    ({"nodepools": {"mutate_on_update": "yes"}}, "nodepools.mutate_on_update", "expected bool"),
    ({"nodepools": {"topology_zones": {"a": "b c"}}}, "nodepools.topology_zones.a", "grid zone"),
    ({"nodepools": {"zones": {}}}, "nodepools.zones", "unknown key (known: "),
    ({"nodepools": {"min_zones": 0}}, "nodepools.min_zones", "expected int >= 1, got 0"),
    ({"nodepools": {"min_zones": 1.5}}, "nodepools.min_zones", "expected int, got float"),
    ({"nodepools": {"min_zones": "2"}}, "nodepools.min_zones", "expected int, got str"),
    ({"nodepools": {"min_zones": True}}, "nodepools.min_zones", "expected int, got bool"),
    # labels
    ({"labels": {"enabled": "yes"}}, "labels.enabled", "expected bool, got str"),
    ({"labels": {"band": 1}}, "labels.band", "expected float < 1.0, got 1"),
    ({"labels": {"band": -0.1}}, "labels.band", "expected float >= 0.0, got -0.1"),
    ({"labels": {"min_interval_seconds": -1}}, "labels.min_interval_seconds", ">= 0.0, got -1"),
    ({"labels": {"interval_seconds": 0}}, "labels.interval_seconds", ">= 1.0, got 0"),
    ({"labels": {"low_below": -5}}, "labels.low_below", "expected float >= 0.0, got -5"),
    ({"labels": {"colour": 1}}, "labels.colour", "unknown key (known: "),
    ({"labels": {"high_from": 100}}, "labels.high_from", "low_below 150 and high_from 100"),
    ({"labels": {"low_below": 500}}, "labels.low_below", "low_below 500 and high_from 400"),
    # reevaluate
    ({"reevaluate": {"enabled": "yes"}}, "reevaluate.enabled", "expected bool, got str"),
    ({"reevaluate": {"interval_seconds": 0}}, "reevaluate.interval_seconds", ">= 1.0, got 0"),
    ({"reevaluate": {"min_interval_seconds": -1}}, "reevaluate.min_interval_seconds", ">= 0.0"),
    (
        {"reevaluate": {"forecast": "tomorrow"}},
        "reevaluate.forecast",
        "expected one of best, day-ahead-profile, none, provider, got 'tomorrow'",
    ),
    ({"reevaluate": {"dwell": 1}}, "reevaluate.dwell", "unknown key (known: "),
    # service
    ({"service": {"name": "Web Hook"}}, "service.name", "expected a DNS-1123 label"),
    ({"service": {"namespace": "x" * 64}}, "service.namespace", "at most 63"),
    ({"service": {"port": 443}}, "service.port", "unknown key (known: "),
    # feed
    ({"feed": None}, "feed", "expected mapping, got null"),
    ({"feed": {"refresh_seconds": 0}}, "feed.refresh_seconds", "expected float >= 1.0, got 0"),
    ({"feed": {"timeout_seconds": 0.01}}, "feed.timeout_seconds", ">= 0.05, got 0.01"),
    ({"feed": {"retries": True}}, "feed.retries", "expected int, got bool"),
    ({"feed": {"retries": 99}}, "feed.retries", "expected int <= 10, got 99"),
    ({"feed": {"breaker_failures": 0}}, "feed.breaker_failures", "expected int >= 1, got 0"),
    ({"feed": {"forecasts": "no"}}, "feed.forecasts", "expected bool, got str"),
    ({"feed": {"colour": 1}}, "feed.colour", "unknown key (known: "),
    (
        {"feed": {"min_ttl_seconds": 100, "max_ttl_seconds": 10}},
        "feed.max_ttl_seconds",
        "must be >= min_ttl_seconds (100), got 10",
    ),
]


@pytest.mark.parametrize(("doc", "path", "message"), BAD_CONFIGS)
def test_bad_config_names_the_path(doc: object, path: str, message: str) -> None:
    with pytest.raises(InvalidInput) as info:
        parse(doc)
    assert info.value.path == path
    assert message in info.value.message
    assert str(info.value) == (f"{path}: {info.value.message}" if path else info.value.message)
    assert "\n" not in str(info.value)


def test_unreadable_and_invalid_files(tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    with pytest.raises(InvalidInput, match="cannot read") as info:
        load(missing)
    assert info.value.path == f"config {missing}"
    bad = tmp_path / "bad.yaml"
    bad.write_text("zone: DE\nclusters: [unclosed\n")
    with pytest.raises(InvalidInput) as info:
        load(bad)
    assert str(info.value) == (
        f"config {bad}: not valid YAML: expected ',' or ']', but got '<stream end>' while "
        "parsing a flow sequence (line 3, column 1)"
    )


def test_errors_in_a_file_name_the_file_then_the_key(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("feed: {retries: 99}\n")
    with pytest.raises(InvalidInput) as info:
        load(path)
    assert str(info.value) == f"config {path}: feed.retries: expected int <= 10, got 99"


@pytest.mark.parametrize(
    ("doc", "known"),
    [
        ({"zon": "DE"}, "zone, clusters, providers, weighting, hysteresis, nodepools, labels,"),
        (
            {"clusters": {"m": {"zone": "FR", "color": "x"}}},
            "zone, provider, region, zones, labels",
        ),
        ({"service": {"port": 443}}, "name, namespace, client_ca, client_auth,"),
        ({"weighting": {"sharpness": 1}}, "exponent, scale"),
    ],
)
def test_an_unknown_key_lists_the_keys_valid_at_its_level(doc: object, known: str) -> None:
    with pytest.raises(InvalidInput) as info:
        parse(doc)
    assert info.value.message.startswith(f"unknown key (known: {known}")
    if info.value.path == "zon":  # top level: the provider sections too
        assert info.value.message.endswith("electricitymaps, watttime, ukgrid, static, trace)")


@pytest.mark.parametrize(
    ("section", "key", "env"),
    [
        ("electricitymaps", "token", "ELECTRICITY_MAPS_API_TOKEN"),
        ("watttime", "password", "WATTTIME_PASSWORD"),
    ],
)
def test_a_credential_in_the_file_is_refused_even_for_a_provider_not_in_use(
    section: str, key: str, env: str
) -> None:
    """Config files end up in ConfigMaps and git: a credential in one is an error at once,
    not only once someone adds the provider to the chain."""
    with pytest.raises(InvalidInput) as info:
        parse({"providers": ["static"], section: {key: "s3cr3t"}})
    assert info.value.path == f"{section}.{key}"
    assert f"do not put credentials in the config file; use {key}_file" in info.value.message
    assert env in info.value.message
    assert "s3cr3t" not in str(info.value)
    assert parse({"providers": ["static"], section: {f"{key}_file": "/x"}}).providers == ("static",)


def test_nodepools_min_zones_defaults_to_two_and_accepts_any_whole_number_from_one() -> None:
    assert parse({}).nodepools.min_zones == 2
    assert parse({"nodepools": {"min_zones": 1}}).nodepools.min_zones == 1
    assert parse({"nodepools": {"min_zones": 5}}).nodepools.min_zones == 5


def test_labels_section_defaults_and_overrides() -> None:
    default = parse({}).labels
    assert (default.enabled, default.band, default.min_interval_seconds) == (True, 0.1, 1800.0)
    assert default.interval_seconds == 60.0
    assert default.thresholds(parse({}).nodepools) == (150.0, 400.0)
    config = parse(
        {
            "nodepools": {"low_below": 50, "high_from": 250},
            "labels": {"enabled": False, "band": 0, "min_interval_seconds": 0, "low_below": 80},
        }
    )
    assert not config.labels.enabled
    assert config.labels.thresholds(config.nodepools) == (80.0, 250.0)


def test_reevaluate_section_defaults_and_overrides() -> None:
    default = parse({}).reevaluate
    assert default.enabled is True
    assert default.interval_seconds == 300
    assert default.min_interval_seconds == 1800
    assert default.forecast == "best"
    for forecast in ("day-ahead-profile", "none", "provider", "best"):
        doc = {"reevaluate": {"enabled": False, "interval_seconds": 1, "forecast": forecast}}
        got = parse(doc).reevaluate
        assert (got.enabled, got.interval_seconds, got.forecast) == (False, 1, forecast)
    assert parse({"reevaluate": {"min_interval_seconds": 0}}).reevaluate.min_interval_seconds == 0
