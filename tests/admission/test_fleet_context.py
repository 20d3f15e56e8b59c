"""Admission and the scheduler API read the fleet inventory from memory: the real Cluster
objects are the placement candidates, config ``clusters:`` are overrides, and a change of
the fleet reaches the next admission."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer

from tests.support import make_app, make_state
from webhook import testing
from webhook.decision.karmada.terms import fill_tiers
from webhook.kinds.reevaluation import Reevaluation
from webhook.kube.inventory import FleetInventory
from webhook.model.config import Config, parse
from webhook.serve import admission
from webhook.serve.state import ServerState

CONFIG = parse({"zone": "DE", "clusters": {"member-cfg": {"zone": "FR"}}})


FLEET = [
    testing.cluster("member-se", labels={"tier": "gold"}, provider="aws", region="eu-north-1"),
    testing.cluster("member-pl", labels={"tier": "gold"}, provider="gcp", region="europe-central2"),
    testing.cluster("member-fr", labels={"tier": "bronze"}, provider="aws", region="eu-west-3"),
]


async def fleet_state(config: Config = CONFIG) -> tuple[ServerState, FleetInventory]:
    state = await make_state(config)
    inventory = FleetInventory(config)
    inventory.replace(FLEET)
    state.inventory = inventory
    return state, inventory


def review(
    placement: dict[str, Any] | None = None, uid: str = "u-1", strategy: str = "weighted"
) -> bytes:
    spread = {**testing.DIVIDED, **(placement or {})}
    policy = testing.propagation_policy(namespace="shop", strategy=strategy, placement=spread)
    return orjson.dumps(testing.review(policy, uid=uid))


def weighted(state: ServerState, body: bytes) -> dict[str, int]:
    """Cluster name -> static weight of the admitted policy."""
    outcome = admission.review(body, state.context(), state.memo)
    assert outcome.encoded_patch is not None, outcome
    weights: dict[str, int] = {}
    for op in orjson.loads(base64.b64decode(outcome.encoded_patch)):
        found = _static_weights(op["path"], op.get("value"))
        for item in found:
            for name in item["targetCluster"].get("clusterNames", []):
                weights[name] = item["weight"]
    return weights


def _static_weights(path: str, value: Any) -> list[dict[str, Any]]:
    if path.endswith("/staticWeightList"):
        return list(value)
    if isinstance(value, dict):
        for key, inner in value.items():
            if found := _static_weights(f"{path}/{key}", inner):
                return found
    return []


async def test_without_an_inventory_the_config_clusters_are_the_fleet() -> None:
    state = await make_state(CONFIG)
    ctx = state.context()
    assert ctx.fleet is None
    assert ctx.fleet_generation == 0
    assert ctx.clusters is CONFIG.clusters
    assert state.clusters() is CONFIG.clusters


async def test_inventory_clusters_and_config_only_members_are_candidates() -> None:
    state, _ = await fleet_state()
    assert sorted(state.context().clusters) == ["member-cfg", "member-fr", "member-pl", "member-se"]
    assert state.clusters()["member-se"].grid_zone == "SE-SE3"
    assert set(weighted(state, review())) == {"member-cfg", "member-fr", "member-pl", "member-se"}


@pytest.mark.parametrize(
    ("affinity", "expected"),
    [
        ({"labelSelector": {"matchLabels": {"tier": "gold"}}}, {"member-se", "member-pl"}),
        (
            {"labelSelector": {"matchExpressions": [
                {"key": "tier", "operator": "NotIn", "values": ["gold"]}]}},
            {"member-fr", "member-cfg"},
        ),
        ({"fieldSelector": {"matchExpressions": [
            {"key": "provider", "operator": "In", "values": ["aws"]}]}},
         {"member-se", "member-fr"}),
        ({"fieldSelector": {"matchExpressions": [
            {"key": "region", "operator": "NotIn", "values": ["eu-north-1"]}]}},
         {"member-pl", "member-fr", "member-cfg"}),  # no region: NotIn matches, as in Karmada
        ({"clusterNames": ["member-se", "member-fr"], "exclude": ["member-fr"]}, {"member-se"}),
    ],
)  # fmt: skip
async def test_selectors_are_evaluated_over_the_real_cluster_objects(
    affinity: dict[str, Any], expected: set[str]
) -> None:
    state, _ = await fleet_state()
    assert set(weighted(state, review({"clusterAffinity": affinity}))) == expected


async def test_a_relabelled_cluster_is_seen_by_the_next_admission() -> None:
    state, inventory = await fleet_state()
    gold = review({"clusterAffinity": {"labelSelector": {"matchLabels": {"tier": "gold"}}}})
    first = state.context().fleet_generation
    assert set(weighted(state, gold)) == {"member-se", "member-pl"}
    gilded = testing.cluster(
        "member-fr", labels={"tier": "gold"}, provider="aws", region="eu-west-3"
    )
    inventory.event("MODIFIED", gilded)
    assert state.context().fleet_generation > first
    assert set(weighted(state, gold)) == {"member-se", "member-pl", "member-fr"}


async def test_a_change_placement_does_not_read_keeps_the_memo() -> None:
    state, inventory = await fleet_state()
    first = state.context().fleet_generation
    ready = {**FLEET[0], "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    inventory.event("MODIFIED", ready)  # a status heartbeat
    assert state.context().fleet_generation == first


async def test_a_relabelled_zone_moves_the_weights() -> None:
    state, inventory = await fleet_state()
    before = weighted(state, review())
    assert before["member-se"] > before["member-pl"]
    relabelled = testing.cluster("member-se", zone="PL", provider="aws", region="eu-north-1")
    inventory.event("MODIFIED", relabelled)
    after = weighted(state, review())
    assert after["member-se"] == after["member-pl"]


async def test_memo_key_includes_the_fleet_generation() -> None:
    state, inventory = await fleet_state()
    weighted(state, review())
    assert len(state.memo) == 1
    weighted(state, review(uid="u-2"))
    assert len(state.memo) == 1  # a hit
    inventory.event("DELETED", FLEET[2])
    assert "member-fr" not in weighted(state, review(uid="u-3"))
    assert len(state.memo) == 2


async def test_a_new_members_zone_is_fetched_in_the_background() -> None:
    state, inventory = await fleet_state()
    state.clusters()
    inventory.event("ADDED", testing.cluster("member-in", provider="aws", region="ap-south-1"))
    zone = state.clusters()["member-in"].grid_zone
    assert zone is not None
    assert zone in state.feed.zones()


async def test_scheduler_api_resolves_a_named_candidate_through_the_inventory() -> None:
    state, _ = await fleet_state()
    state.inventory.event(  # type: ignore[union-attr]
        "ADDED", testing.cluster("member-x", zone="PL")
    )
    body = {"clusters": [
        {"name": "member-se"},  # no location in the request: the inventory's
        {"name": "member-x", "provider": "aws", "region": "eu-north-1"},  # label wins
        {"name": "member-cfg"},  # config-only
        {"name": "member-y", "zone": "DE", "provider": "aws", "region": "eu-north-1"},
        {"name": "member-z", "provider": "aws", "region": "eu-west-3"},  # region table
    ]}  # fmt: skip
    async with TestClient(TestServer(make_app(state), host="127.0.0.1")) as client:
        resp = await client.post("/v1/karmada/score", json=body)
        answer = await resp.json()
    assert [s["zone"] for s in answer["scores"]] == ["SE-SE3", "PL", "FR", "DE", "FR"]


async def test_admission_ranks_on_the_forecast_mean_the_reevaluation_uses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state, _ = await fleet_state()
    now = state.context()
    greenest_now = min(
        (c.name for c in now.clusters.values() if c.grid_zone in now.table),
        key=lambda n: now.table[now.clusters[n].grid_zone or ""].value,
    )
    dirty_later = now.clusters[greenest_now].grid_zone

    def outlook(zone: str, hours: int, method: object) -> list[float]:
        value = now.table[zone].value
        return [value, *([2000.0] * hours)] if zone == dirty_later else [value] * (hours + 1)

    monkeypatch.setattr(state.feed, "outlook", outlook)
    state._context = None
    state.rules = Reevaluation(state.config, state.feed.outlook)  # the outlook as patched
    body = review(uid="u-forecast", strategy="fill")
    outcome = admission.review(body, state.context(), state.memo)
    assert outcome.encoded_patch is not None
    ops = orjson.loads(base64.b64decode(outcome.encoded_patch))
    (terms,) = [op["value"] for op in ops if op["path"].endswith("/clusterAffinities")]
    tiers = fill_tiers({"clusterAffinities": terms})  # failover groups: no CRDs read here
    assert tiers is not None
    assert greenest_now not in tiers[0]  # greenest now, but dirty over the next 24 h
    assert greenest_now in tiers[-1]
