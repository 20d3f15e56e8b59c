"""What request handlers share: the world decisions read (:class:`~webhook.world.World`),
the admission memo and the admission journal."""

from __future__ import annotations

import dataclasses

from aiohttp import web

from webhook.serve.journal import AdmissionJournal
from webhook.serve.memo import DecisionMemo
from webhook.world import World


@dataclasses.dataclass(slots=True)
class ServerState(World):
    """Per-process state, created once at start-up and read by every handler: the world
    and what only the admission path keeps."""

    memo: DecisionMemo = dataclasses.field(default_factory=DecisionMemo)
    """Decisions for identical admission inputs (see :class:`DecisionMemo`), holding at
    most ``service.memo_max_bytes``."""
    journal: AdmissionJournal = dataclasses.field(default_factory=AdmissionJournal)
    """Per-admission log lines and metrics, written in batches."""

    def __post_init__(self) -> None:
        World.__post_init__(self)
        self.memo.max_bytes = self.config.service.memo_max_bytes


STATE = web.AppKey("carbonshift_state", ServerState)
"""Typed key under which the aiohttp application holds the :class:`ServerState`."""
