"""The decision record's fingerprints: stable, and never stale when a value changes."""

from __future__ import annotations

import hashlib

from webhook.decision.record import Record, fingerprint


def _hashed(text: bytes) -> str:
    return hashlib.blake2s(text, digest_size=6).hexdigest()


def test_a_fingerprint_hashes_the_value_with_sorted_keys() -> None:
    assert fingerprint({"b": 1, "a": [True, None]}) == _hashed(b'{"a":[true,null],"b":1}')
    assert fingerprint({"a": [True, None], "b": 1}) == fingerprint({"b": 1, "a": [True, None]})


def test_a_value_fingerprinted_again_after_an_edit_gets_its_new_fingerprint() -> None:
    value: dict[str, object] = {"clusterNames": ["a"]}
    before = fingerprint(value)
    record = Record(own={"placement.clusterAffinity": before})
    assert record.owns("placement.clusterAffinity", value)
    value["clusterNames"] = ["a", "b"]
    assert fingerprint(value) == _hashed(b'{"clusterNames":["a","b"]}') != before
    assert not record.owns("placement.clusterAffinity", value)
    value["clusterNames"] = ["a"]
    assert fingerprint(value) == before
    assert record.owns("placement.clusterAffinity", value)
