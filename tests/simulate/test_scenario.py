"""Scenario files: parsed into the simulator's structs; every bad key names its path."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest

from webhook.decision.forecast import Method
from webhook.model.config import Config, HysteresisConfig, WeightingConfig, overlay
from webhook.model.traces import Column
from webhook.model.validation import InvalidInput
from webhook.simulate.scenario import _MOVED, Compare, hour_index, load, parse

BASE: dict[str, Any] = {
    "start": "2023-01-01T00:00:00Z",
    "end": "2023-01-02T00:00:00Z",
    "clusters": [{"name": "a", "zone": "DE"}],
    "workloads": [{"name": "w", "replicas": 2}],
}


def test_a_full_file_parses(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: full\ndescription: '  two zones  '\n"
        "start: 2023-01-01T00:00:00Z\nend: 2023-01-03T00:00:00+01:00\n"
        "column: direct\npower_kw: 1\n"
        "clusters:\n  - {name: gb, zone: GB, capacity: {share: 0.5}}\n"
        "  - {name: de, zone: DE, capacity: {replicas: 4}}\n  - {name: fr, zone: FR}\n"
        "workloads:\n  - {name: etl, replicas: 8, movable: false, run_hours: 6, every_hours: 24}\n"
        "batch:\n  - {name: ci, zone: PL, slack_hours: 6}\n"
        "policy: {hysteresis: {margin: 0.2}}\ncompare: {forecast: persistence}\n"
    )
    scenario = load(path, {"compare.top_n": "2"})
    assert scenario.name == "full"
    assert scenario.description == "two zones"
    assert scenario.start == datetime(2023, 1, 1, tzinfo=UTC)
    assert scenario.end == datetime(2023, 1, 2, 23, tzinfo=UTC)
    assert scenario.hours == 47
    assert scenario.column is Column.DIRECT
    assert scenario.power_kw == 1.0
    capacities = [(c.share, c.replicas) for c in scenario.clusters]
    assert capacities == [(0.5, None), (None, 4), (None, None)]
    assert scenario.workloads[0].run_hours == 6
    assert scenario.batch[0].length_hours == 1
    assert scenario.batch[0].slack_hours == 6
    assert scenario.compare.forecast is Method.PERSISTENCE
    assert scenario.policy.hysteresis.margin == 0.2
    assert scenario.compare.top_n == 2
    assert scenario.zones() == ("DE", "FR", "GB", "PL")
    assert hour_index(scenario, datetime(2023, 1, 1, 5, tzinfo=UTC)) == 5


def test_batch_only_and_defaults() -> None:
    scenario = parse(
        {**BASE, "clusters": [], "workloads": [], "batch": [{"name": "b", "zone": "DE"}]}
    )
    assert scenario.name == "scenario"
    assert scenario.column is Column.LIFECYCLE
    assert scenario.batch[0].every_hours == 1
    assert scenario.policy == Config()
    assert scenario.compare == Compare()


def _with(**changes: Any) -> dict[str, Any]:
    return {**BASE, **changes}


VALID: dict[str, dict[str, Any]] = {
    "clusters": {"name": "a", "zone": "DE"},
    "workloads": {"name": "w", "replicas": 1},
    "batch": {"name": "b", "zone": "DE"},
}


def _one(section: str, **fields: Any) -> dict[str, Any]:
    """BASE with one valid entry in ``section``, changed by ``fields``."""
    return _with(**{section: [{**VALID[section], **fields}]})


BAD_SCENARIOS = [
    # top level
    (["x"], "", "expected mapping, got list"),
    (_with(nmae="x"), "nmae", "unknown field"),
    ({"end": BASE["end"], "workloads": BASE["workloads"]}, "start", "required, but missing"),
    (_with(start="yesterday"), "start", "invalid RFC3339 encoded datetime"),
    (_with(start="2023-01-01T00:30:00Z"), "start", "must be on the hour"),
    (_with(end="2023-01-01T00:00:00Z"), "end", "must be after start"),
    (_with(interval_hours=0), "interval_hours", "expected int >= 1, got 0"),
    (_with(column="lca"), "column", "expected one of lifecycle, direct, got 'lca'"),
    (_with(power_kw=-0.1), "power_kw", "expected float >= 0.0, got -0.1"),
    (_with(name=7), "name", "expected str, got int"),
    (
        _with(workloads=[], batch=[]),
        "workloads",
        "needs workloads, batch pools, multikueue or several",
    ),
    # clusters
    (_with(clusters={"a": "DE"}), "clusters", "expected list, got mapping"),
    (_with(clusters=[]), "clusters", "workloads need at least one cluster"),
    (_with(clusters=[{"name": "a"}]), "clusters[0].zone", "required, but missing"),
    (_one("clusters", name=""), "clusters[0].name", "length >= 1"),
    (_one("clusters", zone="D E"), "clusters[0].zone", "grid zone key"),
    (_one("clusters", cap=1), "clusters[0].cap", "unknown field"),
    (
        _with(clusters=[{"name": "a", "zone": "DE"}, {"name": "a", "zone": "FR"}]),
        "clusters[1].name",
        "'a' is used twice",
    ),
    (
        _one("clusters", capacity={"share": 1.5}),
        "clusters[0].capacity.share",
        "expected float <= 1.0, got 1.5",
    ),
    (
        _one("clusters", capacity={"share": 0}),
        "clusters[0].capacity.share",
        "expected float > 0.0, got 0",
    ),
    (
        _one("clusters", capacity={"replicas": 0}),
        "clusters[0].capacity.replicas",
        "expected int >= 1, got 0",
    ),
    (_one("clusters", capacity={"nodes": 3}), "clusters[0].capacity.nodes", "unknown field"),
    # workloads
    (_with(workloads=[{"name": "w"}]), "workloads[0].replicas", "required, but missing"),
    (
        _with(workloads=[{"name": "w", "replicas": 1}, {"name": "v", "replicas": 0}]),
        "workloads[1].replicas",
        "expected int >= 1, got 0",
    ),
    (_one("workloads", replicas=1.5), "workloads[0].replicas", "got float"),
    (_one("workloads", movable="no"), "workloads[0].movable", "expected bool, got str"),
    (_one("workloads", offset_hours=-1), "workloads[0].offset_hours", "expected int >= 0, got -1"),
    (_one("workloads", run_hours=0), "workloads[0].run_hours", "expected int >= 1, got 0"),
    (_one("workloads", every=24), "workloads[0].every", "unknown field"),
    (
        _with(workloads=[{"name": "w", "replicas": 1}, {"name": "w", "replicas": 2}]),
        "workloads[1].name",
        "'w' is used twice",
    ),
    # batch
    (_with(batch=[{"name": "b"}]), "batch[0].zone", "required, but missing"),
    (_one("batch", length_hours=0), "batch[0].length_hours", "expected int >= 1, got 0"),
    (_one("batch", slack_hours=-1), "batch[0].slack_hours", "expected int >= 0, got -1"),
    (_one("batch", slack=1), "batch[0].slack", "unknown field"),
    (
        _with(batch=[{"name": "b", "zone": "DE"}, {"name": "b", "zone": "FR"}]),
        "batch[1].name",
        "'b' is used twice",
    ),
    # policy: the product's config parser, its paths under policy.
    (_with(policy=[]), "policy", "expected mapping, got list"),
    (
        _with(policy={"weighting": {"exponent": 9}}),
        "policy.weighting.exponent",
        "expected float <= 8.0, got 9",
    ),
    (
        _with(policy={"hysteresis": {"margin": 1}}),
        "policy.hysteresis.margin",
        "expected float < 1.0, got 1",
    ),
    (
        _with(policy={"hysteresis": {"margn": 0.1}}),
        "policy.hysteresis.margn",
        "unknown key (known: margin, dwell_hours)",
    ),
    (_with(policy={"hysteresis": 0.1}), "policy.hysteresis", "expected mapping, got float"),
    (_with(policy={"sharpness": 2}), "policy.sharpness", "unknown key (known: zone, clusters"),
    (
        _with(policy={"reevaluate": {"forecast": "persistence"}}),
        "policy.reevaluate.forecast",
        "expected one of best, day-ahead-profile, none, provider, got 'persistence'",
    ),
    (
        _with(policy={"nodepools": {"low_below": 300, "high_from": 200}}),
        "policy.nodepools.high_from",
        "must be >= low_below (300), got 200",
    ),
    # policy: a key written elsewhere says where
    (
        _with(policy={"margin": 0.2}),
        "policy.margin",
        "moved to policy.hysteresis.margin (write policy: {hysteresis: {margin: 0.2}})",
    ),
    (
        _with(policy={"exponent": 2, "scale": 50}),
        "policy.exponent",
        "moved to policy.weighting.exponent (write policy: {weighting: {exponent: 2}})",
    ),
    (
        _with(policy={"high_from": 300}),
        "policy.high_from",
        "moved to policy.nodepools.high_from (write policy: {nodepools: {high_from: 300}})",
    ),
    (
        _with(policy={"top_n": 5}),
        "policy.top_n",
        "moved to compare.top_n (write compare: {top_n: 5})",
    ),
    (
        _with(policy={"forecast": "persistence"}),
        "policy.forecast",
        "moved to compare.forecast (write compare: {forecast: persistence})",
    ),
    # compare
    (_with(compare=[]), "compare", "expected mapping, got list"),
    (_with(compare={"top_n": 0}), "compare.top_n", "expected int >= 1, got 0"),
    (_with(compare={"max_clusters": 0}), "compare.max_clusters", "expected int >= 1, got 0"),
    (
        _with(compare={"max_intensity": -1}),
        "compare.max_intensity",
        "expected float >= 0.0, got -1",
    ),
    (_with(compare={"forecast_days": "7"}), "compare.forecast_days", "expected int, got str"),
    (_with(compare={"forecast_hours": 0}), "compare.forecast_hours", "expected int >= 1, got 0"),
    (_with(compare={"forecast": "magic"}), "compare.forecast", "expected one of persistence"),
    (_with(compare={"margin": 0.1}), "compare.margin", "unknown field"),
]


@pytest.mark.parametrize(("doc", "path", "message"), BAD_SCENARIOS)
def test_bad_scenario_names_the_path(doc: object, path: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=re.escape(message)) as info:
        parse(doc)
    assert info.value.path == path


@pytest.mark.parametrize(
    ("overrides", "path", "message"),
    [
        (
            {"policy.weighting.exponent": "x"},
            "policy.weighting.exponent",
            "expected float, got str",
        ),
        (
            {"policy.hysteresis.margin": "2"},
            "policy.hysteresis.margin",
            "expected float < 1.0, got 2",
        ),
        ({"policy.hysteresis.margin": "[1,"}, "policy.hysteresis.margin", "not valid YAML"),
        ({"policy.colour": "1"}, "policy.colour", "unknown key (known: zone, clusters"),
        ({"compare.top_n": "0"}, "compare.top_n", "expected int >= 1, got 0"),
        ({"compare.colour": "1"}, "compare.colour", "unknown field"),
        ({"colour": "1"}, "colour", "expected policy.KEY or compare.KEY"),
        ({"policy": "1"}, "policy", "expected policy.KEY or compare.KEY"),
        (
            {"policy.margin": "0.1"},
            "policy.margin",
            "moved to policy.hysteresis.margin (write policy: {hysteresis: {margin: 0.1}})",
        ),
        ({"top_n": "2"}, "top_n", "moved to compare.top_n (write compare: {top_n: 2})"),
    ],
)
def test_bad_overrides_name_the_key(overrides: dict[str, str], path: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=re.escape(message)) as info:
        parse(BASE, overrides)
    assert info.value.path == path


def test_an_unreadable_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="cannot read") as info:
        load(tmp_path / "missing.yaml")
    assert info.value.path == str(tmp_path / "missing.yaml")


def test_policy_is_a_partial_config_over_the_products_defaults() -> None:
    scenario = parse(_with(policy={"hysteresis": {"margin": 0.2}, "weighting": {"exponent": 2}}))
    default = Config()
    assert scenario.policy.hysteresis == HysteresisConfig(margin=0.2, dwell_hours=4.0)
    assert scenario.policy.hysteresis.dwell_hours == default.hysteresis.dwell_hours
    assert scenario.policy.weighting == WeightingConfig(exponent=2.0, scale=default.weighting.scale)
    rest = {"hysteresis": default.hysteresis, "weighting": default.weighting}
    assert msgspec.structs.replace(scenario.policy, **rest) == default


def test_overrides_set_nested_product_keys_and_compare_keys() -> None:
    doc = _with(policy={"hysteresis": {"dwell_hours": 6}}, compare={"top_n": 4})
    overrides = {
        "policy.hysteresis.margin": "0.2",
        "policy.nodepools.ladder": "[1.0, 0.25, 0]",
        "policy.reevaluate.forecast": "none",
        "compare.max_clusters": "2",
    }
    scenario = parse(doc, overrides)
    assert scenario.policy.hysteresis == HysteresisConfig(margin=0.2, dwell_hours=6.0)
    assert scenario.policy.nodepools.ladder == (1.0, 0.25, 0.0)
    assert scenario.policy.reevaluate.forecast == "none"
    assert (scenario.compare.top_n, scenario.compare.max_clusters) == (4, 2)
    assert doc["policy"] == {"hysteresis": {"dwell_hours": 6}}  # the document is not changed
    bad = {"policy.nodepools.low_below": "500"}  # above the default high_from
    with pytest.raises(InvalidInput, match=r"must be >= low_below \(500\), got 400") as info:
        parse(doc, bad)
    assert info.value.path == "policy.nodepools.high_from"


def test_every_moved_key_is_where_its_error_says() -> None:
    config = Config()
    for key, where in _MOVED.items():
        head, *sections = where.split(".")
        node: object = config if head == "policy" else Compare()
        for section in sections:
            node = getattr(node, section)
        assert isinstance(node, msgspec.Struct)
        assert key in node.__struct_fields__, f"{key} -> {where}"


def test_the_overlay_keeps_the_base_it_is_laid_over() -> None:
    base = overlay(
        Config(),
        {"clusters": {"a": {"zone": "DE"}}, "trace": {"path": "traces", "forecast_hours": 6}},
    )
    config = overlay(
        base,
        {"clusters": {"b": {"zone": "FR"}}, "nodepools": {"ladder": [1, 0]}},
    )
    assert list(config.clusters) == ["a", "b"]  # mappings merge key by key
    assert config.clusters["a"] == base.clusters["a"]
    assert config.provider_options == base.provider_options
    assert config.nodepools.ladder == (1.0, 0.0)  # a list replaces the base's
    assert overlay(config, {}) == config
