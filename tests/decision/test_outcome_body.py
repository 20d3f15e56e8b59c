"""The decision record's human-facing body: each cluster's intensity to a tenth."""

from __future__ import annotations

from webhook.decision.outcome import Lookup


def test_intensities_are_written_to_a_tenth_keeping_their_type() -> None:
    values: dict[str, float | None] = {"a": 245.94, "b": 5.0, "c": 5, "d": None, "e": 245.94}
    zones: dict[str, str | None] = {"a": "DE", "b": "FR", "c": "PL", "d": None, "e": "NL"}
    clusters = Lookup(values, {}, zones).body()["clusters"]
    written = {name: entry["g"] for name, entry in clusters.items()}
    assert written == {"a": 245.9, "b": 5.0, "c": 5, "d": None, "e": 245.9}
    assert type(written["b"]) is float
    assert type(written["c"]) is int
    again = Lookup({"c": 5, "b": 5.0}, {}, zones).body()["clusters"]
    assert type(again["c"]["g"]) is int
    assert type(again["b"]["g"]) is float
