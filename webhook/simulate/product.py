"""What the simulator borrows from the product as it is: admission of an object, the clock."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from webhook import kinds
from webhook.decision import follow
from webhook.decision.outcome import stored
from webhook.kinds.reevaluation import Target

EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
"""Simulated hour 0 (decisions depend on elapsed time only)."""


def at_hour(hour: int) -> datetime:
    """The clock of simulated ``hour``."""
    return EPOCH + timedelta(hours=hour)


def admitted(target: Target, obj: Mapping[str, Any], ctx: kinds.Context) -> dict[str, Any]:
    """``obj`` created at ``ctx.now`` as the webhook stores it
    (:func:`webhook.decision.outcome.stored`); raises ValueError when the decider skips it."""
    created = dict(obj)
    stamp = ctx.now.strftime("%Y-%m-%dT%H:%M:%SZ")
    created["metadata"] = {**created["metadata"], "creationTimestamp": stamp}
    decision = target.row.decide(created, ctx)
    if decision.skipped or decision.record is None:
        raise ValueError(f"carbonshift skipped the {obj['kind']}: {decision.skipped}")
    return follow.apply(created, stored(created, decision, target.row.scope).changes)
