"""The ladder in the batch simulator: a share of the limit starts that share of the work."""

from __future__ import annotations

import random

import pytest

from tests.simulate.grids import MakeGrid, MakeScenario
from webhook.decision.karpenter import ladder
from webhook.model.config import Config, NodePoolConfig, overlay
from webhook.model.vocabulary import DEFAULT_MAX_PAUSE
from webhook.simulate.batch import DEFAULT_TEMPORAL, PausePolicy, batch_policies
from webhook.simulate.engine import _starts, simulate_batch
from webhook.simulate.metrics import Run
from webhook.simulate.pausing import LadderOverTime, OverTime
from webhook.simulate.scenario import Compare


def test_a_share_starts_that_share_of_the_pending_jobs_carrying_fractions() -> None:
    assert _starts(1.0, 5, 0.7) == (5, 0.0)
    assert _starts(0.0, 5, 0.7) == (0, 0.0)
    assert _starts(0.5, 4, 0.0) == (2, 0.0)
    started, credit = _starts(0.5, 1, 0.0)
    assert (started, credit) == (0, 0.5)
    assert _starts(0.5, 1, credit) == (1, 0.0)  # one job every other hour


def _runs(
    make_grid: MakeGrid, make_scenario: MakeScenario, policies: list[PausePolicy]
) -> dict[str, Run]:
    rng = random.Random(3)
    hours = 24 * 21
    values = [300 + 200 * ((h % 24) < 12) + rng.uniform(-60, 60) for h in range(hours)]
    grid = make_grid({"Z": values})
    scenario = make_scenario(hours, batch=[{"name": "p", "zone": "Z", "slack_hours": 24}])
    return {r.key: r for r in simulate_batch(scenario, grid, policies)}


def test_a_two_step_ladder_is_the_pause(make_grid: MakeGrid, make_scenario: MakeScenario) -> None:
    thresholds = {"low_below": 150.0, "high_from": 400.0}
    paused = OverTime(
        max_pause=DEFAULT_MAX_PAUSE, base=overlay(Config(), {"nodepools": thresholds})
    )
    two_steps = {"nodepools": {**thresholds, "ladder": [1.0, 0.0]}}
    two = LadderOverTime(max_pause=DEFAULT_MAX_PAUSE, base=overlay(Config(), two_steps))
    assert two.steps == (1.0, 0.0)
    runs = _runs(
        make_grid,
        make_scenario,
        [
            PausePolicy("run-now", "", lambda _: False),
            PausePolicy("pause", "", paused, deadline_guard=False),
            PausePolicy("two", "", two, deadline_guard=False, share=two.share),
        ],
    )
    assert runs["two"].total == pytest.approx(runs["pause"].total)
    assert runs["two"].changes == runs["pause"].changes
    assert runs["two"].total < runs["run-now"].total


def test_the_ladder_rows_run_every_job_within_max_pause(
    make_grid: MakeGrid, make_scenario: MakeScenario
) -> None:
    runs = _runs(make_grid, make_scenario, batch_policies(Config(), Compare()))
    for key in ("ladder-over-time", "ladder-over-time-forecast"):
        assert runs[key].misses == 0
        assert runs[key].jobs == runs["run-now"].jobs
        assert runs[key].total < runs["run-now"].total


def test_the_ladder_rows_use_the_webhooks_default_steps() -> None:
    rows = {p.key: p for p in batch_policies(Config(), Compare())}
    for key in ("ladder-over-time", "ladder-over-time-forecast"):
        rule = rows[key].paused
        assert isinstance(rule, LadderOverTime)
        assert rule.steps == ladder.DEFAULT_STEPS == NodePoolConfig().ladder
    assert DEFAULT_TEMPORAL == "pause-over-time-forecast"  # the ladder did not beat it
