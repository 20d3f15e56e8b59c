"""What request handlers share: the configuration and the in-memory intensity feed."""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING

from aiohttp import web

from webhook.admission import DecisionMemo
from webhook.config import Config
from webhook.feed import IntensityFeed, Snapshot
from webhook.intensity import utcnow
from webhook.journal import AdmissionJournal
from webhook.kinds import Context

if TYPE_CHECKING:
    from webhook.kube.inventory import FleetInventory


@dataclasses.dataclass(slots=True)
class ServerState:
    """Per-process state, created once at start-up and read by every handler."""

    config: Config
    feed: IntensityFeed
    memo: DecisionMemo = dataclasses.field(default_factory=DecisionMemo)
    """Decisions for identical admission inputs (see :class:`DecisionMemo`)."""
    journal: AdmissionJournal = dataclasses.field(default_factory=AdmissionJournal)
    """Per-admission log lines and metrics, written in batches."""
    inventory: FleetInventory | None = None
    """Karmada Clusters read from the API server (None: no cluster to talk to)."""
    _context: tuple[Snapshot, int, Context] | None = dataclasses.field(default=None, init=False)

    def context(self) -> Context:
        """The decision context now: the feed's snapshot and the time, to the second.

        Rebuilt when the snapshot changes or a second has passed, so a burst of
        admissions shares one (decisions read time only for the minimum dwell, in hours).
        """
        snapshot = self.feed.snapshot()
        second = int(time.time())
        held = self._context
        if held is not None and held[0] is snapshot and held[1] == second:
            return held[2]
        ctx = Context(self.config, snapshot.table, utcnow(), snapshot.generation)
        self._context = (snapshot, second, ctx)
        return ctx


STATE = web.AppKey("carbonshift_state", ServerState)
"""Typed key under which the aiohttp application holds the :class:`ServerState`."""
