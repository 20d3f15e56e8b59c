"""A NodePool's template label comes from the grid of its own zones when they are known.

``carbonshift.io/intensity`` on a pool's nodes tells workloads how clean the capacity is:
a pool whose zones ``nodepools.topology_zones`` maps to SE-SE3 (~23 g) is ``low`` even
when the config's global ``zone`` (or the cluster's Nodes) says DE, and a pool the
``zones`` strategy narrowed is labelled from the zones it kept.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import yaml

from tests.decision.nodepools import apply
from tests.support import NOW, reading
from webhook.cli import preview
from webhook.decision.karpenter.nodepool import LABEL, NodePoolInputs, decide, reevaluate
from webhook.decision.record import Record
from webhook.kinds import Context
from webhook.model.config import NodePoolConfig, load
from webhook.model.vocabulary import DECISION, INTENSITY_CLASS

ZONE = "topology.kubernetes.io/zone"
TABLE = {"DE": reading("DE", 450.0), "SE-SE3": reading("SE-SE3", 23.0), "FR": reading("FR", 60.0)}
TOPOLOGY = {
    "eu-north-1a": "SE-SE3",
    "eu-north-1b": "SE-SE3",
    "eu-central-1a": "DE",
    "eu-central-1b": "DE",
}
ROOT = Path(__file__).resolve().parents[2]


def pool(zones: list[str] | None, strategy: str = "none") -> dict[str, Any]:
    requirements = [] if zones is None else [{"key": ZONE, "operator": "In", "values": zones}]
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "p", "annotations": {"carbonshift.io/strategy": strategy}},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {
                        "group": "karpenter.k8s.aws",
                        "kind": "EC2NodeClass",
                        "name": "default",
                    },
                    "requirements": requirements,
                }
            },
            "limits": {"cpu": "10"},
        },
    }


def inputs(topology: dict[str, str] | None = None, **settings: Any) -> NodePoolInputs:
    config = NodePoolConfig(topology_zones=TOPOLOGY if topology is None else topology, **settings)
    return NodePoolInputs("DE", TABLE, config)


def label_of(stored: dict[str, Any]) -> str:
    value: str = stored["spec"]["template"]["metadata"]["labels"][INTENSITY_CLASS]
    return value


def record_of(stored: dict[str, Any]) -> Record:
    return Record.decode(stored["metadata"]["annotations"][DECISION])


def test_a_pool_in_se_zones_is_low_although_the_global_zone_is_de() -> None:
    obj = pool(["eu-north-1a", "eu-north-1b"])
    stored = apply(obj, decide(obj, inputs()))
    assert label_of(stored) == "low"
    record = record_of(stored)
    assert record.body[LABEL] == {
        "zone": "SE-SE3",
        "g": 23.0,
        "class": "low",
        "from": ["eu-north-1a", "eu-north-1b"],
    }
    assert record.body["zone"] == "DE"  # the local grid the strategies act on, as before
    assert record.body["class"] == "high"


def test_a_pool_in_de_zones_is_high() -> None:
    obj = pool(["eu-central-1a"])
    assert label_of(apply(obj, decide(obj, inputs()))) == "high"


def test_a_narrowed_pool_is_labelled_from_the_zones_it_kept() -> None:
    obj = pool(["eu-north-1a", "eu-central-1a"], strategy="zones")
    decision = decide(obj, inputs(min_zones=1))
    stored = apply(obj, decision)
    assert stored["spec"]["template"]["spec"]["requirements"][-1] == {
        "key": ZONE,
        "operator": "In",
        "values": ["eu-north-1a"],
    }
    assert label_of(stored) == "low"
    assert record_of(stored).body[LABEL]["from"] == ["eu-north-1a"]


def test_zones_on_several_grids_take_the_dirtiest() -> None:
    obj = pool(["eu-north-1a", "eu-central-1a"])  # not narrowed: strategy none
    stored = apply(obj, decide(obj, inputs()))
    assert label_of(stored) == "high"
    assert record_of(stored).body[LABEL]["zone"] == "DE"


def test_without_known_zones_the_local_grid_labels_it() -> None:
    unmapped = pool(["us-east-1a"])
    stored = apply(unmapped, decide(unmapped, inputs()))
    assert label_of(stored) == "high"
    assert LABEL not in record_of(stored).body
    no_topology = pool(["eu-north-1a"])
    stored = apply(no_topology, decide(no_topology, inputs(topology={})))
    assert label_of(stored) == "high"


def test_the_label_record_survives_the_re_evaluation() -> None:
    obj = pool(["eu-north-1a"], strategy="weight")
    stored = apply(obj, decide(obj, inputs()))
    later = reevaluate(stored, inputs(), NOW)
    assert later.record is not None
    assert later.record.body[LABEL] == record_of(stored).body[LABEL]


def test_the_shipped_example_is_labelled_from_its_own_zones() -> None:
    """examples/40-nodepool.yaml with config/example.yaml: one region's zones, all known."""
    [doc] = yaml.safe_load_all((ROOT / "examples" / "40-nodepool.yaml").read_text())
    config = load(str(ROOT / "config" / "example.yaml"))
    requirements = doc["spec"]["template"]["spec"]["requirements"]
    [zones] = [r["values"] for r in requirements if r["key"] == ZONE]
    assert zones
    assert all(z in config.nodepools.topology_zones for z in zones)
    regions = {z[:-1] for z in zones}
    assert len(regions) == 1  # one cloud region
    from webhook.app import build_feed  # noqa: PLC0415

    async def table() -> Any:
        feed = build_feed(config)
        try:
            await feed.refresh_once()
            return feed.table()
        finally:
            await feed.stop()

    ctx = Context(config=config, table=asyncio.run(table()), now=NOW)
    [shown] = preview.preview([doc], ctx)
    assert shown.outcome.result == "patched"
    assert not [w for w in shown.outcome.warnings if "left alone" in w]
    record = record_of(dict(shown.stored))
    assert record.body[LABEL]["from"] == sorted(zones)
    assert label_of(dict(shown.stored)) == record.body[LABEL]["class"]
