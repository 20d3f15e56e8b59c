"""The simulator's carbonshift policies store what the admission webhook stores, and
re-evaluate through the leader's step.

The same intensities go through the webhook (an AdmissionReview for the policy's
PropagationPolicy, :func:`webhook.serve.admission.admit`) and through the simulator's
policy; the stored placements and decision annotations must be identical. Re-evaluation is
the leader's own step (:class:`webhook.kinds.reevaluation.Reevaluation`), so the tests
below check what it does with the product's defaults, not a second copy of it.
"""

from __future__ import annotations

import copy
from datetime import datetime, timedelta
from typing import Any

import jsonpatch
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook import kinds
from webhook.cli import preview
from webhook.decision.karpenter import nodepool
from webhook.decision.ranking import intensity_class
from webhook.model.config import Config, NodePoolConfig, overlay
from webhook.model.intensity import Reading, Signal
from webhook.serve import admission, reviews
from webhook.simulate.batch import PoolMoment, pause_by_class
from webhook.simulate.policies import (
    Fill,
    SpatialPolicy,
    Terms,
    WebhookProposal,
    spatial_policies,
)
from webhook.simulate.product import EPOCH
from webhook.simulate.scenario import Compare

ZONES = {"de": "DE", "gb": "GB", "caiso": "US-CAL-CISO", "nsw": "AU-NSW", "tokyo": "JP-TK"}
CLUSTERS = list(ZONES)
CONFIG = overlay(Config(), {"hysteresis": {"margin": 0.1, "dwell_hours": 3}})
COMPARE = Compare(max_clusters=2, max_intensity=300.0)


def carbon_policies() -> dict[str, SpatialPolicy]:
    """One policy per distinct webhook-backed proposal (the line-up shares some)."""
    out: dict[int, SpatialPolicy] = {}
    for policy in spatial_policies(CONFIG, COMPARE, CLUSTERS, ZONES):
        if isinstance(policy.propose, WebhookProposal) and policy.forecast is None:
            out.setdefault(id(policy.propose), policy)
    return {p.key: p for p in out.values()}


POLICIES = carbon_policies()


def test_every_carbon_policy_kind_is_covered() -> None:
    assert set(POLICIES) == {
        "static-weights",
        "green-first",
        "green-first-available",
        "max-intensity",
        "fill-static",
        "fill-groups",
    }


def _proposal(policy: SpatialPolicy) -> WebhookProposal:
    assert isinstance(policy.propose, WebhookProposal)
    return policy.propose


def _context(proposal: WebhookProposal, view: dict[str, float], now: datetime) -> kinds.Context:
    table = {
        ZONES[name]: Reading(
            ZONES[name], value, Signal.AVERAGE, now, now + timedelta(hours=1), False, "simulation"
        )
        for name, value in view.items()
    }
    return kinds.Context(proposal.config, table, now, karmada=proposal.api)


def _admitted(obj: dict[str, Any], ctx: kinds.Context) -> dict[str, Any]:
    """What the webhook stores for ``obj``."""
    outcome = admission.admit(reviews.request_of(preview.review_for(obj, "CREATE")), ctx)
    assert outcome.result in ("patched", "unchanged"), outcome.reason
    return jsonpatch.apply_patch(copy.deepcopy(obj), outcome.patch)


def test_the_simulator_runs_under_the_products_config() -> None:
    proposal = _proposal(POLICIES["fill-static"])
    assert proposal.config.hysteresis.margin == 0.1
    assert proposal.config == msgspec.structs.replace(CONFIG, clusters=proposal.members.clusters)
    assert proposal.config.rebalance == Config().rebalance
    assert proposal.config.reevaluate == Config().reevaluate


intensity = st.one_of(
    st.sampled_from([0.0, 120.0, 300.0, 300.5, 450.0]),  # ties, the limit, just above it
    st.floats(min_value=0.0, max_value=1000.0, allow_nan=False),
)
views = st.fixed_dictionaries(dict.fromkeys(CLUSTERS, intensity))


@pytest.mark.parametrize("key", sorted(POLICIES))
@settings(max_examples=40, deadline=None)
@given(view=views)
def test_the_simulator_stores_what_the_webhook_stores(key: str, view: dict[str, float]) -> None:
    proposal = _proposal(POLICIES[key])
    stored = proposal.admitted(view, 5)
    obj = copy.deepcopy(dict(proposal.obj))
    obj["metadata"]["creationTimestamp"] = stored["metadata"]["creationTimestamp"]
    assert stored == _admitted(obj, _context(proposal, view, EPOCH + timedelta(hours=5)))

    written = stored["spec"]["placement"]
    intent = proposal(view)
    assert intent == proposal.members.intent(written)
    terms = written.get("clusterAffinities")
    if key == "green-first":
        names = [t["affinityName"] for t in terms]
        assert names == ["carbonshift-greenest", "carbonshift-fallback"]
        assert isinstance(intent, Terms)
    elif key == "fill-groups":  # Karmada before 1.18: failover groups, each adding a tier
        assert isinstance(intent, Fill)
        assert intent.groups or len(intent.tiers) == 1  # one tier: one term in either shape
        assert not any("overflowAffinities" in t for t in terms)
        names = [t["clusterNames"] for t in terms]
        assert [tuple(n) for n in names] == [
            tuple(n for tier in intent.tiers[: k + 1] for n in tier) for k in range(len(names))
        ]
    elif key.startswith("fill") or key == "green-first-available":
        # green-first by room (examples/30-...) overflows in carbon order too.
        (term,) = terms
        assert isinstance(intent, Fill)
        tiers = [term, *term.get("overflowAffinities", [])]
        assert intent.tiers == tuple(tuple(t["clusterNames"]) for t in tiers)
    else:
        assert terms is None
    if key == "max-intensity":
        excluded = set(written["clusterAffinity"].get("exclude") or [])
        assert excluded <= {n for n, v in view.items() if v > 300.0}
        assert excluded.isdisjoint(intent.as_weights())  # type: ignore[union-attr]


def test_reevaluation_holds_for_the_dwell_then_switches() -> None:
    """The leader's step under the config's hysteresis (margin 0.1, dwell 3 h)."""
    policy = POLICIES["fill-static"]
    start = {"de": 100.0, "gb": 200.0, "caiso": 300.0, "nsw": 400.0, "tokyo": 500.0}
    flipped = {"de": 500.0, "gb": 400.0, "caiso": 300.0, "nsw": 200.0, "tokyo": 100.0}
    held = policy.create(start, 0)
    assert isinstance(held.intent, Fill)
    assert held.intent.tiers[0] == ("de",)
    for hour in (1, 2):
        assert policy.revisit(held, flipped, hour) is held  # within the dwell
    switched = policy.revisit(held, flipped, 3)
    assert isinstance(switched.intent, Fill)
    assert switched.intent.tiers[0] == ("tokyo",)
    assert policy.revisit(switched, flipped, 4) is switched  # the same placement stays
    # Not 10 % greener than the placement in force: kept.
    near = {**flipped, "nsw": 95.0}
    assert policy.revisit(switched, near, 9) is switched


@pytest.mark.parametrize("value", [0.0, 149.9, 150.0, 399.9, 400.0, 950.0])
def test_the_class_pause_is_the_nodepool_rule(value: float) -> None:
    settings_ = NodePoolConfig()
    level = intensity_class(value, low_below=settings_.low_below, high_from=settings_.high_from)
    paused = pause_by_class(settings_.low_below, settings_.high_from)
    moment = PoolMoment(0, value, urgency=5, length=1, history=lambda n: [value])
    assert paused(moment) == nodepool.pauses(level) == (value >= 400.0)
