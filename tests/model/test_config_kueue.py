"""The ``kueue:`` section: defaults, bounds, and one-line errors naming the key."""

from __future__ import annotations

import pytest

from webhook.model.config import Config, KueueConfig, parse
from webhook.model.validation import InvalidInput


def test_defaults_leave_kueue_off_and_jobs_unheld() -> None:
    kueue = Config().kueue
    assert kueue == KueueConfig()
    assert not kueue.enabled
    assert kueue.dispatch == "external"
    assert kueue.dispatcher_name == "carbonshift.io/carbon-dispatcher"
    assert kueue.admission_check_controller == "carbonshift.io/carbon-window"
    assert kueue.default_max_delay_seconds is None
    assert (kueue.interval_seconds, kueue.round_seconds, kueue.step) == (10, 60, 1)
    assert kueue.default_runtime_seconds == 3600


def test_a_full_section_reads() -> None:
    kueue = parse(
        {
            "kueue": {
                "enabled": True,
                "dispatch": "order",
                "step": 2,
                "default_max_delay_seconds": 28800,
                "dispatcher_name": "example.com/green",
            }
        }
    ).kueue
    assert (kueue.enabled, kueue.dispatch, kueue.step) == (True, "order", 2)
    assert kueue.default_max_delay_seconds == 28800
    assert kueue.dispatcher_name == "example.com/green"


@pytest.mark.parametrize(
    ("section", "path"),
    [
        ({"dispatch": "all-at-once"}, "kueue.dispatch"),
        ({"step": 0}, "kueue.step"),
        ({"step": 21}, "kueue.step"),
        ({"round_seconds": 0}, "kueue.round_seconds"),
        ({"default_max_delay_seconds": 0}, "kueue.default_max_delay_seconds"),
        ({"default_max_delay_seconds": 604801}, "kueue.default_max_delay_seconds"),
        ({"dispatcher_name": "carbon"}, "kueue.dispatcher_name"),
        ({"admission_check_controller": ""}, "kueue.admission_check_controller"),
        ({"dwell_hours": 4}, "kueue.dwell_hours"),  # that is hysteresis.dwell_hours
    ],
)
def test_bad_values_name_the_key(section: dict[str, object], path: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse({"kueue": section})
    assert caught.value.path == path
    assert "\n" not in str(caught.value)
