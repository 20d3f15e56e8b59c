"""``nodepools.pause_confidence``: a NodePool's pause waits only for an hour surely greener,
by the past errors of the forecast it reads (the feed's judged windows)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from webhook import testing
from webhook.decision import pause
from webhook.decision.forecast_quality import MIN_ERRORS, Spread
from webhook.kinds.reevaluation import OutlookMethod, Reevaluation
from webhook.model.config import parse

NOW_DIRTY = [400.0, 390.0, 300.0, 380.0, 400.0]
"""The local grid now and the next four hours: a dip of 100 g/kWh in two hours."""


def _spread(width: float) -> Spread:
    """Past errors of ``±width`` at every hour ahead (forecasts as often too low as high)."""
    errors = [(-width if i % 2 else width) for i in range(2 * MIN_ERRORS)]
    return Spread.of([errors] * 24)


def _rules(confidence: float | None, width: float | None) -> Reevaluation:
    settings = {"zone": "DE", "reevaluate": {"forecast": "best"}}
    if confidence is not None:
        settings["nodepools"] = {"pause_confidence": confidence}

    def outlook(_zone: str, hours: int, _method: OutlookMethod) -> Sequence[float]:
        return NOW_DIRTY[: hours + 1]

    def spread(_zone: str, _hours: int, _method: OutlookMethod) -> Spread | None:
        return None if width is None else _spread(width)

    return Reevaluation(parse(settings), outlook, spread)


POOL = testing.nodepool("batch", annotations={"carbonshift.io/max-pause": "4h"})


def test_without_the_setting_the_outlook_is_the_forecast() -> None:
    assert _rules(None, 200.0).local_outlook(POOL) == NOW_DIRTY


@pytest.mark.parametrize(("width", "waits"), [(20.0, True), (200.0, False)])
def test_with_it_the_pool_waits_only_for_an_hour_surely_greener(width: float, waits: bool) -> None:
    series = _rules(0.9, width).local_outlook(POOL)
    assert series is not None
    assert series[0] == NOW_DIRTY[0]  # now stays as observed
    assert all(b >= f for b, f in zip(series[1:], NOW_DIRTY[1:], strict=True))
    assert pause.waits(NOW_DIRTY, 1, 4)  # the plain forecast waits for the dip
    assert pause.waits(series, 1, 4) is waits  # surely greener only when errors are small


def test_a_forecast_without_past_errors_is_read_as_it_is() -> None:
    assert _rules(0.9, None).local_outlook(POOL) == NOW_DIRTY


@pytest.mark.parametrize("bad", [0, 1, 1.5, -0.2])
def test_the_setting_is_a_probability(bad: float) -> None:
    with pytest.raises(Exception, match="pause_confidence"):
        parse({"nodepools": {"pause_confidence": bad}})
