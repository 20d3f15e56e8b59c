"""What request handlers share: the configuration and the in-memory intensity feed."""

from __future__ import annotations

import dataclasses

from aiohttp import web

from webhook.admission import DecisionMemo
from webhook.config import Config
from webhook.feed import IntensityFeed
from webhook.journal import AdmissionJournal


@dataclasses.dataclass(slots=True)
class ServerState:
    """Per-process state, created once at start-up and read by every handler."""

    config: Config
    feed: IntensityFeed
    memo: DecisionMemo = dataclasses.field(default_factory=DecisionMemo)
    """Decisions for identical admission inputs (see :class:`DecisionMemo`)."""
    journal: AdmissionJournal = dataclasses.field(default_factory=AdmissionJournal)
    """Per-admission log lines and metrics, written in batches."""


STATE = web.AppKey("carbonshift_state", ServerState)
"""Typed key under which the aiohttp application holds the :class:`ServerState`."""
