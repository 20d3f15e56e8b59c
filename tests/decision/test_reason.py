"""The decision record in words (``carbonshift.io/reason``): one short line beside the
compact record, written by every path that writes a record, saying where the object is
placed and why: every exclusion, weight, pause and rule left alone included."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from tests.support import NOW, reading
from webhook import testing
from webhook.cli.preview import preview
from webhook.decision.reason import EXCLUDED, LIMIT, WEIGHT, WHY, line
from webhook.decision.record import Record
from webhook.kinds import Context
from webhook.kinds.reevaluation import Reevaluation, target_of
from webhook.model.config import ClusterConfig, parse
from webhook.model.vocabulary import DECISION, REASON

GRID = {"SE-SE3": 23.4, "FR": 31.0, "PL": 565.0}
CONFIG = parse({
    "zone": "PL",
    "clusters": {"member-se": {"zone": "SE-SE3"}, "member-fr": {"zone": "FR"},
                 "member-pl": {"zone": "PL"}},
})  # fmt: skip
MEMBERS = ["member-se", "member-fr", "member-pl"]


def _ctx(**values: float) -> Context:
    table = {z: reading(z, v) for z, v in {**GRID, **values}.items()}
    peers = {n: ClusterConfig(name=n, zone=c.zone) for n, c in CONFIG.clusters.items()}
    return Context(config=CONFIG, table=table, now=NOW, peers=peers)


def _stored(obj: Mapping[str, Any], ctx: Context | None = None) -> tuple[dict[str, Any], Record]:
    [done] = preview([obj], ctx or _ctx())
    stored = dict(done.stored)
    annotations = stored["metadata"]["annotations"]
    record = Record.decode(annotations[DECISION])
    assert annotations[REASON] == line(stored["kind"], record)
    assert "\n" not in annotations[REASON]
    return stored, record


def _reason(obj: Mapping[str, Any]) -> str:
    return str(obj["metadata"]["annotations"][REASON])


def test_an_ordered_fill_names_its_tiers_and_every_exclusion() -> None:
    policy = testing.propagation_policy(
        namespace="shop", clusters=MEMBERS, annotations={"carbonshift.io/max-intensity": "500"}
    )
    stored, record = _stored(policy)
    assert record.body[EXCLUDED] == {"max": 500.0, "names": ["member-pl"]}
    assert _reason(stored).startswith(
        "ordered fill: member-se (23 g) first, then member-fr (31 g); "
        "member-pl excluded: 565 g above max-intensity 500; in force since "
    )


def test_carbon_weights_and_a_cluster_policy_say_each_weight() -> None:
    policy = testing.cluster_propagation_policy(enabled=True, clusters=MEMBERS, strategy="weighted")
    stored, _ = _stored(policy)
    assert _reason(stored).startswith("carbon weights: member-se 100 (23 g), member-fr ")
    assert "member-pl " in _reason(stored)


def test_a_nodepool_says_its_weight_and_its_pause() -> None:
    pool = testing.nodepool("np", enabled=True, strategy="weight,pause", limits={"cpu": "64"})
    stored, record = _stored(pool)
    assert stored["spec"]["weight"] == record.body[WEIGHT] == 44
    assert record.paused
    assert record.body[WHY] == "PL is at 565 g/kWh, high from 400"
    text = _reason(stored)
    assert "local grid PL 565 g (high)" in text
    assert "spec.weight 44: the grid's greenness at 565 g (100 at 0 g, 0 at 1000 g)" in text
    assert 'paused: limits.cpu "0", no new nodes: PL is at 565 g/kWh, high from 400' in text


def test_a_rule_left_alone_and_a_key_not_read_are_said() -> None:
    pool = testing.nodepool(
        "np",
        enabled=True,
        strategy="weight",
        weight=7,
        annotations={"carbonshift.io/max-cluster": "1"},
    )
    stored, _ = _stored(pool)
    text = _reason(stored)
    assert "weight not applied: spec.weight is the user's" in text
    assert "ignored carbonshift.io/max-cluster" in text


def test_a_namespace_offloading_names_the_peers_left_out_and_why() -> None:
    nso = {
        "apiVersion": "offloading.liqo.io/v1beta1",
        "kind": "NamespaceOffloading",
        "metadata": {"name": "offloading", "namespace": "shop",
                     "annotations": {"carbonshift.io/max-intensity": "100"}},
        "spec": {"podOffloadingStrategy": "Remote"},
    }  # fmt: skip
    stored, record = _stored(nso)
    assert record.body[EXCLUDED] == {"max": 100.0, "names": ["member-pl"]}
    assert _reason(stored).startswith(
        "offloads to member-se (23 g), member-fr (31 g); "
        "member-pl left out: 565 g above max-intensity 100"
    )
    del nso["metadata"]["annotations"]
    stored, _ = _stored(nso)
    assert "not in the greenest intensity class present" in _reason(stored)


def test_a_field_the_user_took_back_and_a_long_line() -> None:
    record = Record(
        body={
            "clusters": {f"member-{i:03}": {"g": float(i), "t": i} for i in range(60)},
            "user": ["placement.replicaScheduling"],
        }
    )
    text = line("PropagationPolicy", record)
    assert len(text) == LIMIT
    assert text.endswith("…")
    short = Record(body={"user": ["placement.replicaScheduling"]})
    assert line("PropagationPolicy", short) == (
        "the user owns replicaScheduling (edited after carbonshift wrote it)"
    )
    assert line("NodePool", Record()) == "local grid unknown no data"


def test_the_leaders_switch_writes_the_line_of_its_record() -> None:
    policy = testing.propagation_policy(
        namespace="shop", clusters=MEMBERS, created=NOW - timedelta(days=1)
    )
    stored, _ = _stored(policy)
    target = target_of("policy.karmada.io/v1alpha1", "PropagationPolicy")
    assert target is not None
    later = Context(
        config=CONFIG,
        table={z: reading(z, v) for z, v in {**GRID, "SE-SE3": 900.0}.items()},
        now=NOW + timedelta(days=1),
    )
    action = Reevaluation(CONFIG).decide(target, stored, later, {"carbonshift.io/enabled": "true"})
    assert action.outcome == "switched", action.reason
    written = action.applied(stored)
    annotations = written["metadata"]["annotations"]
    assert annotations[REASON] == line("PropagationPolicy", Record.decode(annotations[DECISION]))
    assert annotations[REASON].startswith("ordered fill: member-fr (31 g) first")
