"""Helpers shared by the test suites (import as ``tests.support``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from webhook.intensity import Reading, Signal

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)

FLEET: dict[str, Any] = {
    "zone": "DE",
    "clusters": {
        "member-fr": {
            "zone": "FR",
            "labels": {"tier": "prod"},
            "provider": "aws",
            "region": "eu-west-3",
            "zones": ["eu-west-3a"],
        },
        "member-de": {
            "zone": "DE",
            "labels": {"tier": "prod"},
            "provider": "aws",
            "region": "eu-central-1",
            "zones": ["eu-central-1a"],
        },
        "member-pl": {
            "zone": "PL",
            "labels": {"tier": "dev"},
            "provider": "gcp",
            "region": "europe-central2",
            "zones": ["europe-central2-a"],
        },
    },
}
"""Three member clusters in clearly different grids; local zone DE."""


def reading(zone: str, value: float, **overrides: Any) -> Reading:
    """An hourly average reading valid at :data:`NOW`."""
    fields: dict[str, Any] = {
        "zone": zone,
        "value": value,
        "signal": Signal.AVERAGE,
        "valid_from": NOW,
        "valid_to": NOW + timedelta(hours=1),
        "estimated": False,
        "source": "test",
    }
    fields.update(overrides)
    return Reading(**fields)
