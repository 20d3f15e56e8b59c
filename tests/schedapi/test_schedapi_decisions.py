"""Pure scheduler decisions: zone resolution, filter by max-intensity, scores."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.decision.clusters import (
    Assessment,
    Candidate,
    Verdict,
    assess,
    cluster_zone,
    filter_by_limit,
    node_candidate,
    node_zone,
)
from webhook.decision.ranking import NEUTRAL_SCORE, greenness
from webhook.model.config import ClusterConfig, Config, NodePoolConfig
from webhook.model.intensity import Reading, Signal

CONFIG = Config(
    clusters={
        "cfg": ClusterConfig(name="cfg", zone="PL"),
        "cfg-region": ClusterConfig(name="cfg-region", provider="gcp", region="europe-west9"),
    },
    nodepools=NodePoolConfig(topology_zones={"eu-west-3a": "ES"}),
)


@pytest.mark.parametrize(
    ("candidate", "zone"),
    [
        (Candidate("cfg", zone="SE-SE3", provider="aws", region="eu-west-3"), "SE-SE3"),
        (Candidate("cfg", provider="aws", region="eu-west-3"), "PL"),
        (Candidate("cfg-region"), "FR"),
        (Candidate("other", provider="aws", region="eu-central-1"), "DE"),
        (Candidate("other", region="westeurope"), "NL"),
        (Candidate("other", provider="aws", region="westeurope"), None),
        (Candidate("other"), None),
    ],
)
def test_cluster_zone_order(candidate: Candidate, zone: str | None) -> None:
    assert cluster_zone(candidate, CONFIG) == zone


@pytest.mark.parametrize(
    ("labels", "provider_id", "zone"),
    [
        (
            {"carbonshift.io/grid-zone": "IS", "topology.kubernetes.io/zone": "eu-west-3a"},
            None,
            "IS",
        ),
        (
            {
                "topology.kubernetes.io/zone": "eu-west-3a",
                "topology.kubernetes.io/region": "eu-west-3",
            },
            None,
            "ES",
        ),
        (
            {
                "topology.kubernetes.io/zone": "eu-west-3b",
                "topology.kubernetes.io/region": "eu-west-3",
            },
            None,
            "FR",
        ),
        ({"topology.kubernetes.io/region": "us-west1"}, "gce://p/us-west1-a/n", "US-NW-PACW"),
        ({"topology.kubernetes.io/region": "us-west1"}, "aws:///us-west1a/i-1", None),
        ({}, None, None),
    ],
)
def test_node_zone_order(labels: dict[str, str], provider_id: str | None, zone: str | None) -> None:
    assert node_zone(node_candidate("n", labels, provider_id), CONFIG) == zone


def test_assess_looks_each_zone_up_once_and_wants_the_unknown() -> None:
    looked: list[str] = []
    wanted: list[str] = []

    def lookup(zone: str) -> None:
        looked.append(zone)

    candidates = [Candidate("a", zone="XX"), Candidate("b", zone="XX"), Candidate("c")]
    out = assess(candidates, lambda c: c.zone, lookup, wanted.append)
    assert looked == ["XX"]
    assert wanted == ["XX"]
    assert [v.score for _, v in out] == [NEUTRAL_SCORE] * 3
    assert out[0][1] is out[1][1]  # one place, one shared verdict
    assert out[0][1].reason == "no intensity data yet for zone XX"
    assert out[2][1].reason is not None
    assert "unknown grid zone" in out[2][1].reason


def _reading(zone: str, value: float) -> Reading:
    now = datetime.now(UTC)
    return Reading(zone, value, Signal.AVERAGE, now, now, estimated=False, source="t")


def _assessed(values: dict[str, float | None]) -> list[Assessment]:
    """One candidate per entry; its zone is the upper-cased name, None when unknown."""
    return [
        (n, Verdict(None, None, "unknown"))
        if v is None
        else (n, Verdict(n.upper(), _reading(n.upper(), v), None))
        for n, v in values.items()
    ]


def test_filter_drops_above_limit_keeps_unknown_in_request_order() -> None:
    verdict = filter_by_limit(_assessed({"dirty": 700.0, "green": 50.0, "dunno": None}), 300)
    assert verdict.kept == ["green", "dunno"]
    assert [n for n, _ in verdict.removed] == ["dirty"]
    assert "700" in verdict.removed[0][1]
    assert "max-intensity 300" in verdict.removed[0][1]
    assert verdict.warnings == []


def test_filter_never_empties_the_placement() -> None:
    verdict = filter_by_limit(_assessed({"a": 700.0, "b": 400.0}), 100)
    assert verdict.kept == ["b"]
    assert len(verdict.warnings) == 1


def test_filter_without_limit_keeps_all() -> None:
    assert filter_by_limit(_assessed({"a": 700.0}), None).kept == ["a"]


def test_clusters_in_one_zone_share_the_verdict() -> None:
    reading = _reading("PL", 700.0)
    same = [(n, Verdict("PL", reading, None)) for n in ("x", "y")]
    verdict = filter_by_limit([*same, *_assessed({"g": 20.0})], 100)
    assert verdict.kept == ["g"]
    assert [n for n, _ in verdict.removed] == ["x", "y"]


intensities = st.floats(min_value=0, max_value=5000, allow_nan=False)


@given(a=intensities, b=intensities)
def test_scores_are_bounded_and_monotone(a: float, b: float) -> None:
    low, high = sorted((a, b))
    green, dirty = _assessed({"g": low})[0][1], _assessed({"d": high})[0][1]
    assert 0 <= dirty.score <= green.score <= 100
    assert 0 <= dirty.extender_score <= green.extender_score <= 10
    assert green.score == greenness(low)


@given(
    st.dictionaries(st.text("abc", min_size=1, max_size=3), st.none() | intensities, max_size=8),
    intensities,
)
def test_filter_partitions_and_never_empties(values: dict[str, float | None], limit: float) -> None:
    verdict = filter_by_limit(_assessed(values), limit)
    removed = [n for n, _ in verdict.removed]
    assert sorted(verdict.kept + removed) == sorted(values)
    assert bool(verdict.kept) == bool(values)
    assert all(values[n] is not None and values[n] > limit for n in removed)  # type: ignore[operator]
