"""Open Cluster Management in the decision core: a ManagedCluster's grid zone (the
Karmada Cluster order: label, annotation, config, claims/labels through the region table),
the score arithmetic and the write rule."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support import NOW, reading
from webhook.decision import ocm
from webhook.decision.ranking import CEILING
from webhook.model.config import parse
from webhook.model.vocabulary import ZONE

MAX_AGE = timedelta(hours=2)


def managed(
    name: str = "hub-a",
    labels: dict[str, str] | None = None,
    claims: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": labels or {}}
    if annotations:
        meta["annotations"] = annotations
    status = {"clusterClaims": [{"name": k, "value": v} for k, v in (claims or {}).items()]}
    return {"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
            "metadata": meta, "spec": {"hubAcceptsClient": True}, "status": status}  # fmt: skip


def test_the_zone_label_wins_over_config_and_claims() -> None:
    config = parse({"clusters": {"hub-a": {"zone": "FR"}}})
    obj = managed(labels={ZONE: "SE-SE3"}, claims={ocm.PLATFORM_CLAIM: "AWS",
                                                   ocm.REGION_CLAIM: "eu-central-1"})  # fmt: skip
    got = ocm.managed_cluster(obj, config)
    assert (got.grid_zone, got.zone_source) == ("SE-SE3", "label")


def test_the_annotation_then_the_config_then_the_claims() -> None:
    claims = {ocm.PLATFORM_CLAIM: "AWS", ocm.REGION_CLAIM: "eu-central-1"}
    annotated = managed(annotations={ZONE: "PL"}, claims=claims)
    assert ocm.managed_cluster(annotated, parse({})).zone_source == "annotation"
    configured = ocm.managed_cluster(
        managed(claims=claims), parse({"clusters": {"hub-a": {"zone": "FR"}}})
    )
    assert (configured.grid_zone, configured.zone_source) == ("FR", "config")
    claimed = ocm.managed_cluster(managed(claims=claims), parse({}))
    assert (claimed.provider, claimed.region, claimed.grid_zone) == ("aws", "eu-central-1", "DE")
    assert claimed.zone_source == "region-table"


def test_well_known_labels_when_no_claims() -> None:
    got = ocm.managed_cluster(
        managed(labels={"cloud": "Google", "region": "europe-north1"}), parse({})
    )
    assert (got.provider, got.region, got.grid_zone) == ("gcp", "europe-north1", "FI")
    topo = managed(labels={"cloud": "Azure", "topology.kubernetes.io/region": "swedencentral"})
    assert ocm.managed_cluster(topo, parse({})).provider == "azure"


def test_a_malformed_zone_label_is_a_problem_and_the_next_source_is_used() -> None:
    got = ocm.managed_cluster(
        managed(labels={ZONE: "not a zone!"}), parse({"clusters": {"hub-a": {"zone": "FR"}}})
    )
    assert (got.grid_zone, got.zone_source) == ("FR", "config")
    assert got.problems


def test_unknown_without_any_fact_and_refused_without_a_name() -> None:
    got = ocm.managed_cluster(managed(labels={"cloud": "Other"}), parse({}))
    assert (got.grid_zone, got.zone_source) == (None, "unknown")
    with pytest.raises(ValueError, match=r"metadata\.name"):
        ocm.managed_cluster({"metadata": {}}, parse({}))


def test_scores_are_greener_higher_within_minus_100_and_100() -> None:
    assert ocm.score(0) == 100
    assert ocm.score(CEILING / 2) == 0
    assert ocm.score(CEILING) == -100
    assert ocm.score(5 * CEILING) == -100
    assert ocm.score(-3) == 100
    assert ocm.score(None) is None
    assert ocm.score(25) == 95
    assert ocm.score(100) == 80
    assert ocm.score(800) == -60


@given(st.floats(min_value=0, max_value=CEILING))
def test_a_score_keeps_its_intensity_to_within_half_a_step(intensity: float) -> None:
    value = ocm.score(intensity)
    assert value is not None
    assert -100 <= value <= 100
    assert abs(ocm.intensity_of(value) - intensity) <= CEILING / 400 + 1e-9


def test_scores_from_a_reading_and_its_forecast_mean() -> None:
    current = reading("SE-SE3", 100.0)
    ranked = reading("SE-SE3", 300.0)
    got = ocm.scores(current, ranked, MAX_AGE)
    assert got is not None
    assert got.values == {ocm.INTENSITY_SCORE: 80, ocm.FORECAST_SCORE: 40}
    assert got.valid_until == current.valid_to + MAX_AGE
    same = ocm.scores(current, None, MAX_AGE)
    assert same is not None
    assert same.values[ocm.FORECAST_SCORE] == 80
    assert ocm.scores(None, ranked, MAX_AGE) is None


def test_status_round_trips_through_published() -> None:
    new = ocm.Scores({ocm.INTENSITY_SCORE: 80, ocm.FORECAST_SCORE: -3}, NOW + MAX_AGE)
    body = ocm.status(new)
    assert body["scores"] == [{"name": "forecast", "value": -3}, {"name": "intensity", "value": 80}]
    assert body["validUntil"] == "2026-01-01T14:00:00Z"
    assert ocm.published({"status": body}) == new
    assert ocm.published(None) is None
    assert ocm.published({"status": {"validUntil": "garbage"}}) == ocm.Scores({}, None)


def scored(now_value: int, ahead: int | None = None, hours: float = 2) -> ocm.Scores:
    values = {
        ocm.INTENSITY_SCORE: now_value,
        ocm.FORECAST_SCORE: ahead if ahead is not None else now_value,
    }
    return ocm.Scores(values, NOW + timedelta(hours=hours))


RENEW = timedelta(minutes=3)


def due(held: ocm.Scores | None, new: ocm.Scores, margin: float = 0.1) -> bool:
    return ocm.due(held, new, margin=margin, now=NOW, renew=RENEW)


def test_written_when_nothing_or_not_every_score_is_published() -> None:
    assert due(None, scored(50))
    assert due(ocm.Scores({ocm.INTENSITY_SCORE: 50}, NOW + timedelta(hours=2)), scored(50))


def test_only_a_change_beyond_the_margin_is_written() -> None:
    # 60 stands for 200 g; 58 for 210 g (+5 %), 54 for 230 g (+15 %).
    held = scored(60)
    assert not due(held, scored(60))
    assert not due(held, scored(58))
    assert due(held, scored(54))
    assert due(held, scored(60, ahead=54))  # the forecast's score alone
    assert due(held, scored(58), margin=0.0)  # no margin: every change


def test_valid_until_is_renewed_only_when_it_is_about_to_lapse() -> None:
    held = scored(60, hours=1)
    assert not due(held, scored(60, hours=2))  # newer data, but an hour still to go
    nearly = ocm.Scores(held.values, NOW + timedelta(minutes=2))
    assert due(nearly, scored(60, hours=2))
    assert not due(nearly, ocm.Scores(held.values, nearly.valid_until))  # nothing newer
    assert due(held, scored(60, hours=0.5))  # the data expires earlier than published
