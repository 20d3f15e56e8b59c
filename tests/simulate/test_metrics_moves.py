"""The oracles' moves: the fewest replicas their hour-to-hour placements move."""

from __future__ import annotations

import pytest

from webhook.simulate.metrics import fewest_moves


@pytest.mark.parametrize(
    ("before", "after", "moves"),
    [
        ([0, 0, 0], [3, 1, 0], 0),  # the first hour: every replica is new
        ([3, 1, 0], [3, 1, 0], 0),  # nothing changed
        ([3, 1, 0], [1, 3, 0], 2),  # two replicas change cluster
        ([3, 1, 0], [4, 2, 0], 0),  # grown in place: the new replicas fill the gain
        ([3, 1, 0], [1, 5, 0], 2),  # grown by two, four gained: two of them moved
        ([3, 1, 0], [0, 0, 3], 3),  # shrunk by one, three gained: each a move
        ([3, 1, 2], [3, 0, 0], 0),  # shrunk only
    ],
)
def test_fewest_moves(before: list[int], after: list[int], moves: int) -> None:
    assert fewest_moves(before, after) == moves
