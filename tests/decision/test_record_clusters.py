"""The decision record's clusters read as typed facts, liberally."""

from __future__ import annotations

import orjson

from webhook.decision.record import ClusterFacts, Record


def test_clusters_read_as_typed_facts() -> None:
    text = orjson.dumps(
        {
            "v": 1,
            "clusters": {
                "a": {"zone": "FR", "g": 52, "w": 100, "t": 0},
                "b": {"zone": None, "g": "high", "w": True, "t": 1.5},
                "c": None,
            },
        }
    ).decode()
    clusters = Record.decode(text).clusters
    assert clusters["a"] == ClusterFacts("FR", 52.0, 100, 0)
    assert clusters["b"] == ClusterFacts()
    assert clusters["c"] == ClusterFacts()


def test_a_record_without_clusters_has_none() -> None:
    assert Record.decode(None).clusters == {}
    assert Record(body={"clusters": ["a"]}).clusters == {}
