"""Karmada's replica division as replicated by the simulator."""

from __future__ import annotations

from webhook.simulate.karmada import (
    divide_available,
    divide_static,
    fnv32a,
    names_descending,
    webster,
)


def test_webster_matches_karmadas_comment_example() -> None:
    assert divide_static(9, {"a": 1, "b": 3}) == {"a": 2, "b": 7}


def test_webster_matches_the_sainte_lague_textbook_example() -> None:
    votes = {"A": 100_000, "B": 80_000, "C": 30_000, "D": 20_000}
    assert webster(8, votes) == {"A": 3, "B": 3, "C": 1, "D": 1}


def test_ties_prefer_fewer_seats_then_name_in_the_workloads_direction() -> None:
    assert webster(1, {"a": 1, "b": 1}) == {"a": 1, "b": 0}
    assert webster(1, {"a": 1, "b": 1}, descending=True) == {"a": 0, "b": 1}
    assert webster(3, {"a": 1, "b": 1, "c": 1}) == {"a": 1, "b": 1, "c": 1}


def test_static_division_drops_zero_weights_and_zero_replica_clusters() -> None:
    assert divide_static(4, {"a": 1, "b": 0}) == {"a": 4}
    assert divide_static(2, {"a": 0, "b": 0}) == {"a": 1, "b": 1}
    assert divide_static(1, {"a": 100, "b": 1}) == {"a": 1}


def test_available_division_respects_capacity_or_reports_unschedulable() -> None:
    assert divide_available(5, {"a": 1, "b": 10}) == {"b": 5}
    assert divide_available(3, {"a": 1, "b": 1}) is None
    # Webster on 11 seats over 1:10 gives a:1, b:10 - exactly the capacity.
    assert divide_available(12, {"a": 1, "b": 10}) is None
    assert divide_available(11, {"a": 1, "b": 10}) == {"a": 1, "b": 10}


def test_fnv32a_known_values() -> None:
    assert fnv32a("") == 0x811C9DC5
    assert fnv32a("a") == 0xE40C292C
    assert names_descending("a") is False
