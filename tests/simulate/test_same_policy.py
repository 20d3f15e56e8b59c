"""The simulator's carbonshift policies place exactly as the admission webhook does.

The same intensities go through the webhook (an AdmissionReview for the policy's
PropagationPolicy, :func:`webhook.serve.admission.admit`) and through the simulator's policy
step; the placements must be identical: clusters, weights, term order, exclusions, and
the hysteresis must hold or switch at the same hours.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import jsonpatch
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook import kinds
from webhook.cli import preview
from webhook.decision import hysteresis, nodepool
from webhook.decision.ranking import intensity_class
from webhook.model.config import Config, HysteresisConfig, NodePoolConfig
from webhook.model.intensity import Reading, Signal
from webhook.model.vocabulary import REFRESH
from webhook.serve import admission
from webhook.simulate.policies import (
    Fill,
    PoolMoment,
    SpatialPolicy,
    Terms,
    WebhookProposal,
    pause_by_class,
    spatial_policies,
)
from webhook.simulate.scenario import PolicySettings

ZONES = {"de": "DE", "gb": "GB", "caiso": "US-CAL-CISO", "nsw": "AU-NSW", "tokyo": "JP-TK"}
CLUSTERS = list(ZONES)
SETTINGS = PolicySettings(max_clusters=2, max_intensity=300.0, margin=0.1, dwell_hours=3)
T0 = datetime(2023, 3, 1, tzinfo=UTC)


def carbon_policies() -> dict[str, SpatialPolicy]:
    """One policy per distinct webhook-backed proposal (the line-up shares some)."""
    out: dict[int, SpatialPolicy] = {}
    for policy in spatial_policies(SETTINGS, CLUSTERS, ZONES):
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
    }


def _proposal(policy: SpatialPolicy) -> WebhookProposal:
    assert isinstance(policy.propose, WebhookProposal)
    return policy.propose


def _context(proposal: WebhookProposal, view: dict[str, float], now: datetime) -> kinds.Context:
    config = Config(
        clusters=proposal.members.clusters,
        weighting=proposal.weighting,
        hysteresis=HysteresisConfig(margin=SETTINGS.margin, dwell_hours=SETTINGS.dwell_hours),
    )
    table = {
        ZONES[name]: Reading(
            ZONES[name], value, Signal.AVERAGE, now, now + timedelta(hours=1), False, "test"
        )
        for name, value in view.items()
    }
    return kinds.Context(config, table, now)


def _admitted(
    obj: dict[str, Any], ctx: kinds.Context, operation: str = "CREATE"
) -> tuple[dict[str, Any], list[str]]:
    """What the webhook stores for ``obj`` and its warnings."""
    outcome = admission.admit(admission.request_of(preview.review_for(obj, operation)), ctx)
    assert outcome.result in ("patched", "unchanged"), outcome.reason
    return jsonpatch.apply_patch(copy.deepcopy(obj), outcome.patch), outcome.warnings


intensity = st.one_of(
    st.sampled_from([0.0, 120.0, 300.0, 300.5, 450.0]),  # ties, the limit, just above it
    st.floats(min_value=0.0, max_value=1000.0, allow_nan=False),
)
views = st.fixed_dictionaries(dict.fromkeys(CLUSTERS, intensity))


@pytest.mark.parametrize("key", sorted(POLICIES))
@settings(max_examples=60, deadline=None)
@given(view=views)
def test_the_simulator_places_as_the_webhook_writes(key: str, view: dict[str, float]) -> None:
    proposal = _proposal(POLICIES[key])
    obj = copy.deepcopy(dict(proposal.obj))
    stored, _ = _admitted(obj, _context(proposal, view, T0))
    written = stored["spec"]["placement"]

    assert proposal.placement(view) == written  # clusters, weights, term order, exclude
    intent = proposal(view)
    assert intent == proposal.members.intent(written)
    terms = written.get("clusterAffinities")
    if key.startswith("green-first"):
        names = [t["affinityName"] for t in terms]
        assert names == ["carbonshift-greenest", "carbonshift-fallback"]
        assert isinstance(intent, Terms)
        assert intent.terms == tuple(tuple(t["clusterNames"]) for t in terms)
    elif key.startswith("fill"):
        (term,) = terms
        assert isinstance(intent, Fill)
        tiers = [term, *term.get("overflowAffinities", [])]
        assert intent.tiers == tuple(tuple(t["clusterNames"]) for t in tiers)
    else:
        assert terms is None
        weights = written["replicaScheduling"]["weightPreference"]["staticWeightList"]
        assert intent.as_weights() == {
            w["targetCluster"]["clusterNames"][0]: w["weight"] for w in weights
        }
    if key == "max-intensity":
        excluded = set(written["clusterAffinity"].get("exclude") or [])
        assert excluded.isdisjoint(intent.as_weights())
        assert excluded == {n for n, v in view.items() if v > 300.0} - set(intent.as_weights())


walk = st.lists(
    st.fixed_dictionaries(
        {name: st.sampled_from([60.0, 100.0, 105.0, 200.0, 500.0]) for name in CLUSTERS}
    ),
    min_size=4,
    max_size=12,
)


@pytest.mark.parametrize("key", sorted(POLICIES))
@settings(max_examples=25, deadline=None)
@given(hours=walk)
def test_a_refresh_holds_or_switches_as_the_simulator_does(
    key: str, hours: list[dict[str, float]]
) -> None:
    """Hour 0 creates the policy; every later hour a refresh re-decides it on both sides."""
    policy = POLICIES[key]
    rule_policy = policy if policy.rule is not None else _with_rule(policy)
    assert rule_policy.rule is not None
    proposal = _proposal(rule_policy)
    obj = copy.deepcopy(dict(proposal.obj))
    stored, _ = _admitted(obj, _context(proposal, hours[0], T0))
    held = rule_policy.decide(proposal(hours[0]), hours[0], None, 0.0)
    for hour, view in enumerate(hours[1:], start=1):
        refreshed = copy.deepcopy(stored)
        refreshed["metadata"]["annotations"][REFRESH] = str(hour)
        ctx = _context(proposal, view, T0 + timedelta(hours=hour))
        stored, warnings = _admitted(refreshed, ctx, "UPDATE")
        stored["metadata"]["annotations"].pop(REFRESH)
        before = held
        held = rule_policy.decide(proposal(view), view, held, float(hour))

        # The same placement on both sides, kept or switched at the same hours...
        assert held.intent == proposal.members.intent(stored["spec"]["placement"]), hour
        webhook_kept = stored == refreshed | {"metadata": stored["metadata"]}
        assert webhook_kept == (held is before), hour
        # ...for the same reason.
        verdict = hysteresis.judge(
            rule_policy.rule, before.record, proposal(view).as_weights(), view, float(hour)
        )
        kept_for = {w.split(": ")[-1].split(" ")[0] for w in warnings if "placement kept" in w}
        assert kept_for == {
            hysteresis.Verdict.DWELL: {"in"},
            hysteresis.Verdict.MARGIN: {"new"},
        }.get(verdict, set()), hour


def _with_rule(policy: SpatialPolicy) -> SpatialPolicy:
    """``static-weights`` re-decided through the same hysteresis as the others."""
    rule = next(p.rule for p in POLICIES.values() if p.rule is not None)
    return SpatialPolicy(policy.key, policy.label, policy.propose, reevaluate=True, rule=rule)


@pytest.mark.parametrize("value", [0.0, 149.9, 150.0, 399.9, 400.0, 950.0])
def test_the_class_pause_is_the_nodepool_rule(value: float) -> None:
    settings_ = NodePoolConfig()
    level = intensity_class(value, low_below=settings_.low_below, high_from=settings_.high_from)
    paused = pause_by_class(settings_.low_below, settings_.high_from)
    moment = PoolMoment(0, value, urgency=5, length=1, history=lambda n: [value])
    assert paused(moment) == nodepool.pauses(level) == (value >= 400.0)
