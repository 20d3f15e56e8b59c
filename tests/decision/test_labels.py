"""The Cluster intensity label rule: plain classes, the hysteresis band, the minimum
interval between changes, stale data, and what is read back from a Cluster."""

from __future__ import annotations

import datetime

import pytest

from webhook.decision.labels import Current, Rule, cluster_annotations, decide
from webhook.model import vocabulary
from webhook.model.config import parse
from webhook.model.intensity import Reading, Signal

NOW = datetime.datetime(2026, 11, 23, 12, 0, tzinfo=datetime.UTC)
LONG_AGO = NOW - datetime.timedelta(days=1)
RULE = Rule(low_below=150, high_from=400, band=0.1, min_interval=datetime.timedelta(minutes=30))


def reading(value: float, *, stale: bool = False, zone: str = "SE-SE3") -> Reading:
    start = NOW - datetime.timedelta(minutes=20)
    return Reading(
        zone, value, Signal.AVERAGE, start, start + datetime.timedelta(hours=1), False,
        "static", stale,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("value", "klass"),
    [(0, "low"), (149.9, "low"), (150, "medium"), (399.9, "medium"), (400, "high"), (900, "high")],
)
def test_an_unlabelled_cluster_gets_the_plain_class_at_once(value: float, klass: str) -> None:
    got = decide(Current(), reading(value), RULE, NOW)
    assert (got.klass, got.changed, got.since) == (klass, True, NOW)
    assert got.labels() == {vocabulary.INTENSITY_CLASS: klass}
    assert got.annotations is not None
    assert got.annotations[vocabulary.INTENSITY_SINCE] == "2026-11-23T12:00:00Z"


@pytest.mark.parametrize(
    ("current", "value", "expected"),
    [
        # low -> medium needs 150 * 1.1 = 165
        ("low", 150, "low"),
        ("low", 164.9, "low"),
        ("low", 165, "medium"),
        # medium -> low needs below 150 * 0.9 = 135
        ("medium", 140, "medium"),
        ("medium", 134.9, "low"),
        # medium -> high needs 400 * 1.1 = 440
        ("medium", 420, "medium"),
        ("medium", 440, "high"),
        # high -> medium needs below 400 * 0.9 = 360
        ("high", 380, "high"),
        ("high", 359, "medium"),
        # two steps at once when far enough past both thresholds
        ("low", 500, "high"),
        ("high", 100, "low"),
        ("high", 140, "medium"),  # below 135 would be low; 140 is within low's band
    ],
)
def test_the_band_holds_a_cluster_hovering_at_a_threshold(
    current: str, value: float, expected: str
) -> None:
    got = decide(Current(current, LONG_AGO), reading(value), RULE, NOW)
    assert got.klass == expected
    assert got.changed == (expected != current)
    assert got.since == (NOW if got.changed else LONG_AGO)
    if not got.changed:
        assert "stays" in got.reason


def test_a_change_explains_itself_with_the_intensity_and_the_threshold() -> None:
    got = decide(Current("low", LONG_AGO), reading(500), RULE, NOW)
    assert got.reason.startswith("low -> high: intensity 500 gCO2eq/kWh (SE-SE3, static)")
    assert "high_from 440" in got.reason
    assert "+10% band" in got.reason


def test_a_hovering_cluster_does_not_flip_every_refresh() -> None:
    current, changes = Current("medium", LONG_AGO), 0
    for i, value in enumerate([148, 152, 141, 155, 139, 160, 145] * 3):
        got = decide(current, reading(value), RULE, NOW + datetime.timedelta(minutes=5 * i))
        changes += got.changed
        current = Current(got.klass, got.since)
    assert changes == 0
    assert current.klass == "medium"


def test_at_most_one_change_per_min_interval() -> None:
    changed_at = NOW - datetime.timedelta(minutes=10)
    held = decide(Current("low", changed_at), reading(600), RULE, NOW)
    assert (held.klass, held.changed, held.since) == ("low", False, changed_at)
    assert "at most one change per 1800 s" in held.reason
    assert "1200 s to go" in held.reason
    assert held.annotations is not None  # the current intensity is still shown
    assert held.annotations[vocabulary.INTENSITY_VALUE] == "600"
    later = decide(Current("low", changed_at), reading(600), RULE, changed_at + RULE.min_interval)
    assert (later.klass, later.changed) == ("high", True)


def test_a_zero_interval_and_zero_band_follow_every_reading() -> None:
    rule = Rule(low_below=150, high_from=400, band=0.0, min_interval=datetime.timedelta(0))
    got = decide(Current("low", NOW), reading(150), rule, NOW)
    assert (got.klass, got.changed) == ("medium", True)


@pytest.mark.parametrize("current", [Current(), Current("low", LONG_AGO)])
def test_stale_data_never_changes_the_label_or_the_annotations(current: Current) -> None:
    got = decide(current, reading(900, stale=True), RULE, NOW)
    assert (got.klass, got.changed, got.annotations) == (current.klass, False, None)
    assert "stale" in got.reason


def test_no_reading_changes_nothing() -> None:
    got = decide(Current("high", LONG_AGO), None, RULE, NOW)
    assert (got.klass, got.changed, got.annotations) == ("high", False, None)


def test_annotations_name_intensity_zone_source_and_data_time() -> None:
    assert cluster_annotations(reading(123.4, zone="FR"), None) == {
        vocabulary.INTENSITY_VALUE: "123",
        vocabulary.INTENSITY_ZONE: "FR",
        vocabulary.INTENSITY_SOURCE: "static",
        vocabulary.INTENSITY_TIME: "2026-11-23T11:40:00Z",
    }


def test_current_is_read_from_the_cluster_and_malformed_values_count_as_absent() -> None:
    labels = {vocabulary.INTENSITY_CLASS: "high", "other": "x"}
    since = {vocabulary.INTENSITY_SINCE: "2026-11-23T10:00:00Z"}
    assert Current.read(labels, since) == Current("high", NOW - datetime.timedelta(hours=2))
    bad = Current.read({vocabulary.INTENSITY_CLASS: "green"}, {vocabulary.INTENSITY_SINCE: "x"})
    assert bad == Current()
    naive = {vocabulary.INTENSITY_SINCE: "2026-11-23T10:00:00"}
    assert Current.read({}, naive).since is None


def test_the_rule_comes_from_the_config() -> None:
    assert Rule.of(parse({})) == Rule(150, 400, 0.1, datetime.timedelta(seconds=1800))
    config = parse(
        {
            "nodepools": {"low_below": 100, "high_from": 300},
            "labels": {"high_from": 500, "band": 0.2, "min_interval_seconds": 60},
        }
    )
    assert Rule.of(config) == Rule(100, 500, 0.2, datetime.timedelta(seconds=60))
