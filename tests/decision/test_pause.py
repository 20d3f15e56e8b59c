"""The NodePool pause over time: the pure rule and the re-evaluation entry point."""

from __future__ import annotations

import copy
from datetime import datetime, timedelta

import orjson
import pytest

from tests.decision.nodepools import (
    DAY,
    DIRTY_THEN_CLEAN,
    FLAT,
    T0,
    H,
    apply,
    inputs,
    pool,
    record,
)
from tests.support import reading
from webhook.decision import pause
from webhook.decision.forecast_quality import Spread
from webhook.decision.karpenter.nodepool import NodePoolInputs, decide, reevaluate
from webhook.decision.pause import State, step, surely, waits
from webhook.model.config import NodePoolConfig

# --- the rule -------------------------------------------------------------------------------


def test_pauses_when_dirty_and_a_cleaner_hour_is_forecast_within_slack() -> None:
    s = step("high", DIRTY_THEN_CLEAN, State(), T0, DAY)
    assert s.paused
    assert s.changed
    assert s.state.paused_at == T0
    assert "in 3 h" in s.why


def test_no_pause_when_nothing_cleaner_is_forecast() -> None:
    s = step("high", FLAT, State(), T0, DAY)
    assert not s.paused
    assert not s.changed


def test_no_pause_when_the_cleaner_hour_is_beyond_the_slack() -> None:
    assert not step("high", DIRTY_THEN_CLEAN, State(), T0, timedelta(minutes=90)).paused
    assert step("high", DIRTY_THEN_CLEAN, State(), T0, timedelta(hours=3)).paused


def test_with_a_forecast_dirty_means_dirtier_than_a_coming_hour_whatever_the_class() -> None:
    assert step("medium", DIRTY_THEN_CLEAN, State(), T0, DAY).paused
    assert step("low", DIRTY_THEN_CLEAN, State(), T0, DAY).paused
    assert not step("medium", sorted(DIRTY_THEN_CLEAN), State(), T0, DAY).paused
    assert not step(None, DIRTY_THEN_CLEAN, State(), T0, DAY).paused


def test_without_a_forecast_no_pause_unless_the_grid_is_high() -> None:
    assert not step("medium", None, State(), T0, DAY).paused
    assert step("high", None, State(), T0, DAY).paused


def test_resumes_when_the_cleaner_hour_comes() -> None:
    state = step("high", DIRTY_THEN_CLEAN, State(), T0, DAY).state
    for hour in (1, 2):  # the forecast moves on with the clock
        s = step("high", DIRTY_THEN_CLEAN[hour:], state, T0 + hour * H, DAY)
        assert s.paused
        assert not s.changed
    s = step("medium", DIRTY_THEN_CLEAN[3:], state, T0 + 3 * H, DAY)
    assert not s.paused
    assert s.changed
    assert s.state == State(paused_at=None, resumed_at=T0 + 3 * H)


def test_resumes_at_max_pause_even_when_still_dirty() -> None:
    paused = State(paused_at=T0)
    falling = [500.0 - i for i in range(30)]  # always cleaner later
    assert step("high", falling, paused, T0 + 5 * H, timedelta(hours=6)).paused
    s = step("high", falling, paused, T0 + 6 * H, timedelta(hours=6))
    assert not s.paused
    assert s.changed
    assert "max-pause 6h used up" in s.why
    # ... without a forecast and without data too
    assert not step("high", None, paused, T0 + DAY, DAY).paused
    assert not step(None, None, paused, T0 + DAY, DAY).paused
    assert step(None, None, paused, T0 + DAY - H, DAY).paused


def test_without_a_forecast_pauses_while_high() -> None:
    s = step("high", None, State(), T0, DAY)
    assert s.paused
    assert s.state.paused_at == T0
    assert step("high", None, s.state, T0 + H, DAY).paused
    assert not step("medium", None, s.state, T0 + 2 * H, DAY).paused


def test_runs_at_least_an_hour_after_a_resume() -> None:
    resumed = State(resumed_at=T0)
    assert not step("high", DIRTY_THEN_CLEAN, resumed, T0 + H / 2, DAY).paused
    assert step("high", DIRTY_THEN_CLEAN, resumed, T0 + H, DAY).paused


def test_the_simulator_and_the_nodepool_share_the_forecast_rule() -> None:
    assert waits(DIRTY_THEN_CLEAN, 1, 24)
    assert not waits(DIRTY_THEN_CLEAN, 1, 1)
    assert not waits(FLAT, 1, 24)  # ties go to now


def test_state_round_trips_through_the_record_body() -> None:
    state = State(paused_at=T0, resumed_at=T0 - DAY)
    assert State.of(orjson.loads(orjson.dumps(state.body()))) == state
    assert State.of({"paused_at": "yesterday", "resumed_at": 5}) == State()


@pytest.mark.parametrize(
    ("minutes", "text"), [(1440, "24h"), (90, "1h30m"), (45, "45m"), (60, "1h")]
)
def test_durations_read_as_max_pause_writes_them(minutes: int, text: str) -> None:
    assert pause.duration(timedelta(minutes=minutes)) == text


# --- re-evaluating stored NodePools ---------------------------------------------------------

LIMITS = {"memory": "1000Gi", "cpu": "200", "nvidia.com/gpu": "8"}


@pytest.mark.parametrize("limits", [LIMITS, None])
def test_a_pause_and_its_resume_restore_the_limits_exactly(limits: dict[str, str] | None) -> None:
    original = pool() if limits is None else pool(limits=copy.deepcopy(limits))
    paused = apply(original, reevaluate(original, inputs(500, DIRTY_THEN_CLEAN), T0))
    assert paused["spec"]["limits"] == {**(limits or {}), "cpu": "0"}
    assert record(paused)["paused_at"] == "2026-03-01T10:00:00Z"
    held = reevaluate(paused, inputs(520, DIRTY_THEN_CLEAN[1:]), T0 + H)
    assert held.changes == []
    resumed = apply(paused, reevaluate(paused, inputs(200, DIRTY_THEN_CLEAN[3:]), T0 + 3 * H))
    assert orjson.dumps(resumed["spec"]) == orjson.dumps(original["spec"])
    assert ("limits" in resumed["spec"]) is (limits is not None)
    assert "paused_at" not in record(resumed)
    assert record(resumed)["resumed_at"] == "2026-03-01T13:00:00Z"


def test_max_pause_annotation_bounds_the_pause() -> None:
    original = pool(annotations={"carbonshift.io/max-pause": "2h"}, limits={"cpu": "64"})
    falling = [500.0 - i for i in range(30)]
    paused = apply(original, reevaluate(original, inputs(500, falling), T0))
    assert paused["spec"]["limits"] == {"cpu": "0"}
    assert reevaluate(paused, inputs(500, falling), T0 + H).changes == []
    decision = reevaluate(paused, inputs(500, falling), T0 + 2 * H)
    assert apply(paused, decision)["spec"]["limits"] == {"cpu": "64"}
    assert any("max-pause 2h used up" in w for w in decision.warnings)


def test_a_malformed_max_pause_warns_and_uses_the_default() -> None:
    original = pool(annotations={"carbonshift.io/max-pause": "soon"})
    decision = reevaluate(original, inputs(500, None), T0)
    assert any("carbonshift.io/max-pause ignored" in w for w in decision.warnings)
    paused = apply(original, decision)
    assert reevaluate(paused, inputs(500, None), T0 + DAY - H).changes == []
    assert "limits" not in apply(paused, reevaluate(paused, inputs(500, None), T0 + DAY))["spec"]


def test_reevaluation_never_touches_the_template() -> None:
    created = apply(
        pool("efficiency,zones,weight,pause"),
        decide(pool("efficiency,zones,weight,pause"), inputs(50)),
    )
    template = copy.deepcopy(created["spec"]["template"])
    assert template["metadata"]["labels"]["carbonshift.io/intensity"] == "low"
    obj = created
    for i, (value, outlook) in enumerate(
        [(500, DIRTY_THEN_CLEAN), (520, DIRTY_THEN_CLEAN[1:]), (90, None), (None, None)]
    ):
        decision = reevaluate(obj, inputs(value, outlook), T0 + i * H)
        assert all(c.path[:2] in (("spec", "limits"), ("spec", "weight")) for c in decision.changes)
        obj = apply(obj, decision)
        assert obj["spec"]["template"] == template
    assert obj["spec"]["weight"] == 91  # the last weight with data stays without data


def test_reevaluation_keeps_the_templates_ownership_for_a_later_refresh() -> None:
    obj = pool("efficiency,pause")
    created = apply(obj, decide(obj, inputs(500)))
    arm64 = {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}
    assert arm64 in created["spec"]["template"]["spec"]["requirements"]
    later = apply(created, reevaluate(created, inputs(100, None), T0))
    assert record(later)["own"].keys() >= {"template.requirements"}
    refreshed = apply(later, decide(later, inputs(100)))  # a refresh when the grid is clean
    assert arm64 not in refreshed["spec"]["template"]["spec"]["requirements"]


def test_limits_edited_while_paused_belong_to_the_user() -> None:
    original = pool(limits={"cpu": "64"})
    paused = apply(original, reevaluate(original, inputs(500, None), T0))
    paused["spec"]["limits"] = {"cpu": "8"}  # the user edits the paused pool
    decision = reevaluate(paused, inputs(200, None), T0 + H)
    assert decision.changes == []


def test_static_pools_are_left_alone() -> None:
    original = pool(replicas=3)
    decision = reevaluate(original, inputs(500, DIRTY_THEN_CLEAN), T0)
    assert decision.changes == []
    assert decision.record is not None
    assert decision.record.body["left"][0]["rule"] == "pause"


def test_admission_with_a_clock_records_when_the_pause_began() -> None:
    obj = pool()
    timed = NodePoolInputs("DE", {"DE": reading("DE", 500)}, NodePoolConfig(), now=T0)
    stored = apply(obj, decide(obj, timed))
    assert stored["spec"]["limits"] == {"cpu": "0"}
    assert record(stored)["paused_at"] == "2026-03-01T10:00:00Z"
    assert "limits" not in apply(stored, reevaluate(stored, inputs(500, None), T0 + DAY))["spec"]


def test_a_pause_from_admission_without_a_clock_ends_at_max_pause_after_its_reading() -> None:
    obj = pool()
    stored = apply(obj, decide(obj, inputs(500)))  # tests.support readings start at NOW
    assert "paused_at" not in record(stored)
    began = datetime.fromisoformat(record(stored)["at"].replace("Z", "+00:00"))
    assert reevaluate(stored, inputs(500, None), began + DAY - H).changes == []
    assert "limits" not in apply(stored, reevaluate(stored, inputs(500, None), began + DAY))["spec"]


@pytest.mark.parametrize("outlook", [DIRTY_THEN_CLEAN, None])
def test_reevaluation_is_idempotent(outlook: list[float] | None) -> None:
    obj = pool("weight,pause", limits={"cpu": "64"})
    once = apply(obj, reevaluate(obj, inputs(500, outlook), T0))
    assert once["spec"]["limits"] == {"cpu": "0"}
    assert reevaluate(once, inputs(500, outlook), T0).changes == []


# --- holding only for a surely greener hour ---------------------------------------------------


def _spread(errors: list[float], hours: int = 3) -> Spread:
    """Every hour ahead erred by ``errors`` (forecast - truth) in the past."""
    return Spread.of([errors * 10] * hours)


def test_the_hold_waits_only_when_the_greener_hour_clears_the_confidence() -> None:
    series = [100.0, 90.0, 95.0, 99.0]  # 10 below now one hour ahead
    # Past errors: 70 % of forecasts were at most 5 too high, 30 % 20 too high.
    spread = _spread([5.0] * 7 + [20.0] * 3)
    assert waits(series, 1, 3)  # the plain forecast waits
    assert waits(series, 1, 3, spread=spread, confidence=0.6)  # 90 - 5 < 100: 70 % >= 60 %
    assert waits(series, 1, 3, spread=spread, confidence=0.7)
    # A forecast that ran low: truth is forecast + 15 in 70 % of the past.
    low = _spread([-15.0] * 7 + [0.0] * 3)
    assert waits(series, 1, 3, spread=low, confidence=0.3)  # 30 % of errors are >= 0
    assert not waits(series, 1, 3, spread=low, confidence=0.7)  # 90 + 15 > 100: not sure
    # No spread, or no setting: the old rule.
    assert waits(series, 1, 3, spread=low, confidence=None)
    assert waits(series, 1, 3, spread=None, confidence=0.99)
    assert pause.CONFIDENCE is None


def test_surely_keeps_now_and_unmeasured_hours() -> None:
    spread = Spread.of([[2.0] * 30])
    assert surely([100.0, 90.0, 80.0], spread, 0.9) == [100.0, 88.0, 80.0]


def test_the_pause_step_holds_only_for_a_surely_greener_hour() -> None:
    outlook = [400.0, 380.0, 390.0]
    unsure = _spread([-30.0] * 8 + [0.0] * 2)
    assert step("high", outlook, State(), T0, DAY).paused
    held = step("high", outlook, State(), T0, DAY, spread=unsure, confidence=0.8)
    assert not held.paused
    assert held.why.startswith("no cleaner hour forecast")
    paused = State(paused_at=T0)
    assert step("high", outlook, paused, T0 + H, DAY).paused
    assert not step("high", outlook, paused, T0 + H, DAY, spread=unsure, confidence=0.8).paused
