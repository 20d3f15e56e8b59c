"""The decision record's clusters read as typed facts, liberally."""

from __future__ import annotations

import orjson
import pytest

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


def test_a_decoded_record_is_decoded_once_and_refuses_writes() -> None:
    # The readers of one object share the record decoded from its annotation; a decision
    # builds a new record, so a write to the shared one is a bug and says so.
    text = Record(body={"clusters": {"a": {"g": 10.0}}}, own={"x": "f"}, orig={"x": 1}).encode()
    first = Record.decode(text)
    assert Record.decode(text) is first
    assert first.entries == {"a": {"g": 10.0}}
    for write in (
        lambda: first.body.update(at="now"),
        lambda: first.own.__setitem__("y", "g"),
        lambda: first.orig.pop("x"),
    ):
        with pytest.raises(TypeError, match="read-only"):
            write()
    assert {**first.body, "at": "now"}["at"] == "now"  # a new record starts from a copy
