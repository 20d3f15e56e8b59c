"""Strategy ``price``: each instance size's carbon cost as a NodeOverlay price adjustment."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from webhook.decision.karpenter import carbonprice
from webhook.decision.karpenter.carbonprice import Pool
from webhook.model.config import CarbonPriceConfig
from webhook.model.vocabulary import DEFAULT_NODEPOOL_STRATEGIES, knobs

T0 = datetime(2026, 11, 25, 12, tzinfo=UTC)
KWOK = "karpenter.kwok.sh"
S = CarbonPriceConfig()
PATTERN = re.compile(r"^(([+-]{1}(\d*\.?\d+))|(\+{1}\d*\.?\d+%)|(^(-\d{1,2}(\.\d+)?%)$)|(-100%))$")
"""NodeOverlay's ``priceAdjustment`` pattern (Karpenter v1.14.1 CRD)."""


def test_the_carbon_cost_of_an_hour_worked_by_hand() -> None:
    # 2 vCPUs x 2.12 W = 4.24 W = 0.00424 kWh in an hour; x 700 g/kWh = 2.968 g;
    # x $190 per 1e6 g = $0.00056392.
    assert carbonprice.usd_per_hour(2, 2.12, 700.0, S) == pytest.approx(0.00056392)
    assert carbonprice.usd_per_hour(2, 1.08, 700.0, S) == pytest.approx(0.00028728)
    with_pue = CarbonPriceConfig(pue=1.5, usd_per_tonne=100.0)
    assert carbonprice.usd_per_hour(4, 1.0, 500.0, with_pue) == pytest.approx(0.0003)


@pytest.mark.parametrize(
    ("usd", "text"),
    [(0.00056392, "+0.00056392"), (0.0, "+0"), (1.5, "+1.5"), (1e-12, "+0"), (-1.0, "+0")],
)
def test_adjustments_are_what_the_crd_accepts(usd: float, text: str) -> None:
    assert carbonprice.adjustment(usd) == text
    assert PATTERN.match(text)


def test_one_overlay_per_architecture_and_size_selecting_the_priced_pools() -> None:
    plan = carbonprice.plan([Pool("b", KWOK), Pool("a", KWOK)], 700.0, S, zone="DE", at=T0)
    assert len(plan.overlays) == 2 * 12
    assert plan.left == {}
    arm = plan.overlays["carbonshift-price-arm64-2"]
    assert arm["spec"] == {
        "requirements": [
            {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["a", "b"]},
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]},
            {"key": "karpenter.kwok.sh/instance-cpu", "operator": "In", "values": ["2"]},
        ],
        "priceAdjustment": "+0.00028728",
        "weight": 1,
    }
    assert arm["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "carbonshift",
        "carbonshift.io/overlay": "price",
    }
    assert arm["metadata"]["annotations"] == {
        "carbonshift.io/intensity-value": "700",
        "carbonshift.io/intensity-zone": "DE",
        "carbonshift.io/intensity-since": "2026-11-25T12:00:00Z",
    }
    # A dirty grid makes the efficient type cheaper by the carbon it does not emit.
    amd = plan.overlays["carbonshift-price-amd64-2"]["spec"]["priceAdjustment"]
    assert float(amd) > float(arm["spec"]["priceAdjustment"])


def test_pools_of_an_unknown_provider_are_left_with_the_key_that_fixes_it() -> None:
    plan = carbonprice.plan([Pool("x", "example.com")], 300.0, S, zone="DE", at=T0)
    assert plan.overlays == {}
    assert "nodepools.price.cpu_labels" in plan.left["x"]
    own = CarbonPriceConfig(cpu_labels={"example.com": "example.com/cpus"}, vcpus=(4,))
    plan = carbonprice.plan([Pool("x", "example.com")], 300.0, own, zone="DE", at=T0)
    assert set(plan.overlays) == {"carbonshift-price-amd64-4", "carbonshift-price-arm64-4"}


def test_pools_of_two_providers_get_a_set_each() -> None:
    pools = [Pool("a", KWOK), Pool("b", "karpenter.k8s.aws")]
    plan = carbonprice.plan(pools, 300.0, CarbonPriceConfig(vcpus=(2,)), zone="DE", at=T0)
    assert sorted(plan.overlays) == [
        "carbonshift-price-aws-amd64-2",
        "carbonshift-price-aws-arm64-2",
        "carbonshift-price-kwok-amd64-2",
        "carbonshift-price-kwok-arm64-2",
    ]
    aws = plan.overlays["carbonshift-price-aws-arm64-2"]["spec"]["requirements"]
    assert aws[0]["values"] == ["b"]
    assert aws[2]["key"] == "karpenter.k8s.aws/instance-cpu"


@pytest.mark.parametrize(
    ("basis", "age_minutes", "now", "want"),
    [
        (None, 0, 700.0, True),  # nothing kept yet
        (700.0, 10, 100.0, False),  # within the minimum interval, however far it moved
        (700.0, 31, 680.0, False),  # within the margin (5 %)
        (700.0, 31, 600.0, True),
        (0.0, 31, 1.0, True),
    ],
)
def test_prices_move_through_the_margin_and_the_minimum_interval(
    basis: float | None, age_minutes: int, now: float, want: bool
) -> None:
    since = T0 - timedelta(minutes=age_minutes) if basis is not None else None
    got = carbonprice.due(basis, since, now, T0, margin=0.05, min_interval_seconds=1800)
    assert got is want


def test_the_basis_is_read_back_from_the_kept_overlays() -> None:
    plan = carbonprice.plan([Pool("a", KWOK)], 432.5, S, zone="DE", at=T0)
    assert carbonprice.basis_of(list(plan.overlays.values())) == (432.5, T0)
    assert carbonprice.basis_of([{"metadata": {"annotations": {}}}]) == (None, None)
    want = plan.overlays["carbonshift-price-arm64-2"]
    assert not carbonprice.differs(want, want)
    moved = carbonprice.plan([Pool("a", KWOK)], 500.0, S, zone="DE", at=T0)
    assert carbonprice.differs(moved.overlays["carbonshift-price-arm64-2"], want)


def test_price_is_the_default_strategy_of_an_opted_in_nodepool() -> None:
    assert knobs({}, "nodepool").strategies == DEFAULT_NODEPOOL_STRATEGIES == {"price"}
    assert knobs({"carbonshift.io/strategy": "none"}, "nodepool").strategies == {"none"}
    assert knobs({"carbonshift.io/strategy": "pause"}, "nodepool").strategies == {"pause"}
    assert knobs({}, "policy").strategies == frozenset()
