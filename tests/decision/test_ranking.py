"""The ranking core: weights, greenness, order, limits, classes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from webhook.decision.ranking import (
    DISTINCT,
    NEUTRAL_SCORE,
    carbon_weights,
    greenness,
    intensity_class,
    order_greenest,
    within_limit,
)

intensity = st.floats(min_value=0, max_value=2000, allow_nan=False)
fleet = st.dictionaries(
    st.text("abcdefgh", min_size=1, max_size=4), intensity, min_size=1, max_size=12
)


@given(fleet, st.floats(min_value=0.1, max_value=4))
def test_weights_are_integers_of_at_least_one(values: dict[str, float], exponent: float) -> None:
    weights = carbon_weights(values, exponent=exponent)
    assert set(weights) == set(values)
    assert all(isinstance(w, int) and w >= 1 for w in weights.values())


@given(fleet, st.floats(min_value=0.1, max_value=4))
def test_weights_are_monotone_and_strict_past_ten_percent(
    values: dict[str, float], exponent: float
) -> None:
    weights = carbon_weights(values, exponent=exponent)
    for a, va in values.items():
        for b, vb in values.items():
            fa, fb = max(va, 1.0), max(vb, 1.0)
            if fa <= fb:
                assert weights[a] >= weights[b], (a, b)
            if fa * DISTINCT <= fb:
                assert weights[a] > weights[b], (a, b)


def test_weights_follow_the_documented_formula() -> None:
    assert carbon_weights({"fr": 50.0, "de": 400.0}) == {"fr": 100, "de": 12}
    assert carbon_weights({"fr": 50.0, "de": 100.0}, exponent=2) == {"fr": 100, "de": 25}


def test_exponent_zero_weighs_every_cluster_evenly() -> None:
    # weighting.exponent: 0 is a valid setting ("0 means even weights").
    assert carbon_weights({"fr": 50.0, "de": 400.0, "x": None}, exponent=0) == dict.fromkeys(
        ("fr", "de", "x"), 100
    )


def test_tiny_ratios_still_separate_clusters_ten_percent_apart() -> None:
    weights = carbon_weights({"a": 10.0, "b": 1000.0, "c": 1100.0, "d": 1250.0})
    assert weights["a"] > weights["b"] > weights["c"] > weights["d"] >= 1


def test_unknown_intensity_is_weighted_as_the_mean() -> None:
    weights = carbon_weights({"fr": 100.0, "pl": 500.0, "x": None})
    assert weights["x"] == carbon_weights({"fr": 100.0, "pl": 500.0, "m": 300.0})["m"]
    assert carbon_weights({"x": None, "y": None}) == {"x": 100, "y": 100}


def test_greenness_is_absolute_and_neutral_for_unknown() -> None:
    assert greenness(0) == 100
    assert greenness(500) == 50
    assert greenness(5000) == 0
    assert greenness(None) == NEUTRAL_SCORE


def test_order_puts_unknown_last_and_breaks_ties_by_name() -> None:
    assert order_greenest({"b": 10.0, "a": 10.0, "c": None, "d": 5.0}) == ["d", "a", "b", "c"]


def test_limit_keeps_the_greenest_when_everything_is_above() -> None:
    assert within_limit({"a": 500.0, "b": 300.0}, 100) == (["b"], ["a"])
    assert within_limit({"a": 50.0, "b": 300.0, "c": None}, 100) == (["a", "c"], ["b"])


def test_intensity_classes() -> None:
    kw = {"low_below": 150.0, "high_from": 400.0}
    assert [intensity_class(v, **kw) for v in (149.9, 150, 399.9, 400)] == [
        "low",
        "medium",
        "medium",
        "high",
    ]
