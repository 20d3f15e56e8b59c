"""The NodePool ladder: the pure rule, the written limit and the decider over time."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import orjson
import pytest

from tests.decision.nodepools import (
    ADMITTED_AT,
    DAY,
    DIRTY_THEN_CLEAN,
    FLAT,
    T0,
    H,
    admitted,
    apply,
    inputs,
    np_step,
    pool,
    record,
)
from webhook.decision import pause
from webhook.decision.karpenter import ladder
from webhook.decision.karpenter.ladder import State, gap, limit, step, target
from webhook.decision.karpenter.nodepool import NodePoolInputs, decide, reevaluate
from webhook.model.config import parse
from webhook.model.validation import InvalidInput

STEPS = (1.0, 0.5, 0.0)
SLIGHTLY_CLEANER = [500.0, 490.0] + [500.0] * 23
"""A cleaner hour 2 % below now."""


# --- the rule -------------------------------------------------------------------------------


def test_the_gap_is_the_greenest_hour_within_the_slack_against_now() -> None:
    assert gap(DIRTY_THEN_CLEAN, 24) == pytest.approx(0.6)
    assert gap(DIRTY_THEN_CLEAN, 2) == 0.0  # the 200 is 3 h ahead
    assert gap(FLAT, 24) == 0.0
    assert gap([0.0, 10.0], 1) == 0.0


def test_steps_follow_the_gap_with_a_forecast_and_the_class_without() -> None:
    assert target("high", FLAT, 24, STEPS) == 0
    assert target("low", SLIGHTLY_CLEANER, 24, STEPS) == 1
    assert target("low", DIRTY_THEN_CLEAN, 24, STEPS) == 2
    assert target("low", None, 24, STEPS) == 0
    assert target("medium", None, 24, STEPS) == 1
    assert target("high", None, 24, STEPS) == 2
    assert target("medium", None, 24, (1.0, 0.0)) == 0
    assert target(None, None, 24, STEPS) == 0


def test_two_steps_are_the_pause() -> None:
    for series in (DIRTY_THEN_CLEAN, SLIGHTLY_CLEANER, FLAT, None):
        for level in ("low", "medium", "high"):
            p = pause.step(level, series, pause.State(), T0, DAY)
            s = step(level, series, State(), T0, DAY, (1.0, 0.0))
            assert (s.share < 1.0) is p.paused
            assert s.state.times == p.state


def test_steps_down_and_back_to_the_whole_limit_at_the_cleaner_hour() -> None:
    s = step("high", DIRTY_THEN_CLEAN, State(), T0, DAY)
    assert (s.share, s.changed, s.state.times.paused_at) == (0.0, True, T0)
    held = step("high", DIRTY_THEN_CLEAN[1:], s.state, T0 + H, DAY)
    assert (held.share, held.changed) == (0.0, False)
    back = step("medium", DIRTY_THEN_CLEAN[3:], held.state, T0 + 3 * H, DAY)
    assert (back.share, back.changed) == (1.0, True)
    assert back.state == State(1.0, pause.State(resumed_at=T0 + 3 * H))
    # ... and keeps it at least an hour
    assert step("high", DIRTY_THEN_CLEAN, back.state, T0 + 3 * H + H / 2, DAY).share == 1.0


def test_max_pause_bounds_every_step_below_the_whole_limit() -> None:
    falling = [500.0 - i for i in range(30)]  # always slightly cleaner later
    s = step("high", falling, State(), T0, timedelta(hours=6))
    assert s.share == 0.5
    assert step(None, None, s.state, T0 + 5 * H, timedelta(hours=6)).share == 0.5
    end = step("high", falling, s.state, T0 + 6 * H, timedelta(hours=6))
    assert (end.share, end.changed) == (1.0, True)
    assert "max-pause 6h used up" in end.why


def test_state_round_trips_through_the_record_body() -> None:
    state = State(0.5, pause.State(paused_at=T0))
    assert State.of(orjson.loads(orjson.dumps(state.body()))) == state
    assert State.of({"step": 0.5}) == State()  # no start: not stepped down
    assert State.of({"step": "half", "paused_at": "2026-03-01T10:00:00Z"}).share == 1.0


@pytest.mark.parametrize(
    ("user", "share", "used", "written"),
    [
        ("200", 0.5, None, "100"),
        ("200", 0.0, None, "0"),
        ("200", 0.0, "48", "48"),  # never below what already runs
        ("200", 0.5, "150500m", "150500m"),
        ("3", 0.5, None, "1500m"),
        (64, 0.25, "1", "16"),
        ("2500m", 0.5, None, "1250m"),
        (None, 0.0, None, "0"),
        (None, 0.0, "8", "8"),
        (None, 0.5, None, None),  # no cpu limit: only the 0 step applies
        ("many", 0.5, None, None),
    ],
)
def test_the_written_limit(user: object, share: float, used: object, written: str | None) -> None:
    assert limit(user, share, used) == written


# --- the decider ------------------------------------------------------------------------------

LIMITS = {"memory": "1000Gi", "cpu": "200"}


def laddered(**spec: Any) -> dict[str, Any]:
    return pool("ladder", limits=copy.deepcopy(LIMITS), **spec)


def test_the_ladder_steps_down_and_back_restoring_the_limits_byte_for_byte() -> None:
    original = laddered()
    half = apply(original, reevaluate(original, inputs(500, SLIGHTLY_CLEANER), T0))
    assert half["spec"]["limits"] == {"memory": "1000Gi", "cpu": "100"}
    assert record(half)["step"] == 0.5
    zero = apply(half, reevaluate(half, inputs(500, DIRTY_THEN_CLEAN), T0 + H))
    assert zero["spec"]["limits"]["cpu"] == "0"
    assert record(zero)["paused_at"] == "2026-03-01T10:00:00Z"  # still the first step down
    back = apply(zero, reevaluate(zero, inputs(200, FLAT), T0 + 2 * H))
    assert orjson.dumps(back["spec"]) == orjson.dumps(original["spec"])
    assert "step" not in record(back)


def test_a_step_never_goes_below_what_the_pool_uses() -> None:
    original = {**laddered(), "status": {"resources": {"cpu": "120", "memory": "400Gi"}}}
    decision = reevaluate(original, inputs(500, DIRTY_THEN_CLEAN), T0)
    assert apply(original, decision)["spec"]["limits"]["cpu"] == "120"
    assert any("what the pool uses" in w for w in decision.warnings)


def test_a_pool_without_a_cpu_limit_is_left_unlimited_on_a_partial_step() -> None:
    original = pool("ladder")
    decision = reevaluate(original, inputs(500, SLIGHTLY_CLEANER), T0)
    assert decision.changes == []
    assert any("ladder left alone: no spec.limits.cpu" in w for w in decision.warnings)
    zero = apply(original, reevaluate(original, inputs(500, DIRTY_THEN_CLEAN), T0))
    assert zero["spec"]["limits"] == {"cpu": "0"}


def test_admission_steps_by_the_class_and_a_refresh_restores() -> None:
    original = laddered()
    table = inputs(250)
    stored = apply(original, decide(original, table))
    assert stored["spec"]["limits"]["cpu"] == "100"  # medium: the middle step
    assert stored["spec"]["template"]["metadata"]["labels"]["carbonshift.io/intensity"] == "medium"
    settings = NodePoolInputs("DE", inputs(100).table, inputs(100).settings)
    assert apply(stored, decide(stored, settings))["spec"]["limits"] == LIMITS


def test_the_steps_come_from_the_config() -> None:
    original = laddered()
    cfg = inputs(500, SLIGHTLY_CLEANER)
    three = NodePoolInputs(
        "DE", cfg.table, type(cfg.settings)(ladder=(1.0, 0.75)), outlook=cfg.outlook
    )
    assert apply(original, reevaluate(original, three, T0))["spec"]["limits"]["cpu"] == "150"


def test_ladder_replaces_pause_when_both_are_listed() -> None:
    original = pool("pause,ladder", limits=copy.deepcopy(LIMITS))
    stored = apply(original, reevaluate(original, inputs(500, SLIGHTLY_CLEANER), T0))
    assert stored["spec"]["limits"]["cpu"] == "100"


def test_static_pools_are_left_alone() -> None:
    decision = reevaluate(laddered(replicas=3), inputs(500, DIRTY_THEN_CLEAN), T0)
    assert decision.changes == []
    assert any("ladder left alone: a static NodePool" in w for w in decision.warnings)


def test_default_steps() -> None:
    assert ladder.DEFAULT_STEPS == STEPS


@pytest.mark.parametrize("steps", [[0.5, 0.0], [1.0, 0.5, 0.5], [1.0, 0.0, 0.5], [1.0], [1.0, 1.5]])
def test_the_config_refuses_steps_that_do_not_start_whole_and_decrease(steps: list[float]) -> None:
    with pytest.raises(InvalidInput, match=r"nodepools\.ladder"):
        parse({"nodepools": {"ladder": steps}})


def test_the_config_takes_decreasing_steps() -> None:
    assert parse({"nodepools": {"ladder": [1, 0.25]}}).nodepools.ladder == (1.0, 0.25)


# --- the leader's re-evaluation -----------------------------------------------------------------


def test_each_step_down_is_a_pause_event_and_the_whole_limit_back_a_resume() -> None:
    limits = {"cpu": "200", "memory": "1000Gi"}
    stored = admitted(ADMITTED_AT, strategy="ladder", limits=limits, g=100)  # low: the whole limit
    assert stored["spec"]["limits"] == limits
    half = np_step(stored, ADMITTED_AT + H, outlook=SLIGHTLY_CLEANER, DE=300)
    assert (half.outcome, half.pause) == ("switched", "paused")
    assert half.reason.startswith('limits.cpu "100" (50% of the user\'s limit): DE is at 300')
    stepped = half.applied(stored)
    zero = np_step(stepped, ADMITTED_AT + 2 * H, outlook=DIRTY_THEN_CLEAN, DE=500)
    assert (zero.outcome, zero.pause) == ("switched", "paused")
    assert zero.reason.startswith('limits.cpu "0" (0% of the user\'s limit)')
    down = zero.applied(stepped)
    back = np_step(down, ADMITTED_AT + 3 * H, outlook=FLAT, DE=200)
    assert (back.outcome, back.pause) == ("switched", "resumed")
    assert orjson.dumps(back.applied(down)["spec"]) == orjson.dumps(stored["spec"])


# --- warnings a Karpenter user needs -------------------------------------------------------------


def test_a_limited_pool_names_the_other_pools_or_says_there_is_none() -> None:
    original = laddered()
    alone = reevaluate(original, inputs(500, DIRTY_THEN_CLEAN), T0)
    assert any("carbonshift knows no other NodePool" in w for w in alone.warnings)
    known = inputs(500, DIRTY_THEN_CLEAN)
    others = NodePoolInputs(
        "DE", known.table, known.settings, outlook=known.outlook, other_pools=["spot", "default"]
    )
    named = reevaluate(original, others, T0)
    assert any("can land on NodePools default, spot" in w for w in named.warnings)
    assert not any("NodePool" in w for w in reevaluate(original, inputs(200, FLAT), T0).warnings)


def test_efficiency_says_it_forces_arm64_and_how_to_undo_it() -> None:
    from tests.decision.admission_pools import inputs as admission_inputs  # noqa: PLC0415
    from tests.decision.admission_pools import nodepool, store  # noqa: PLC0415

    original = nodepool("efficiency")
    decision = decide(original, admission_inputs(450))
    text = " ".join(decision.warnings)
    assert "forces kubernetes.io/arch In [arm64]" in text
    assert "multi-arch" in text
    assert "drop efficiency from carbonshift.io/strategy" in text
    assert all(len(w) < 120 for w in decision.warnings)
    # ... and the undo it names works: without efficiency a refresh gives the user's pool back
    stored = store(original, admission_inputs(450))
    stored["metadata"]["annotations"]["carbonshift.io/strategy"] = ""
    again = store(stored, admission_inputs(450))
    assert again["spec"]["template"]["spec"]["requirements"] == []


def test_an_unknown_local_zone_leaves_nodepools_alone_and_says_so() -> None:
    unknown = NodePoolInputs(None, {}, inputs(500).settings)
    decision = decide(laddered(), unknown)
    assert decision.changes == []
    assert any("local grid zone is unknown" in w for w in decision.warnings)
