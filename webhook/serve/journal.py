"""The admission journal: one log line and the metrics per admission, written in batches.

A request handler only appends ``(outcome, seconds, time)`` to a list. Shortly after
(:data:`FLUSH_SECONDS`), or once :data:`MAX_BATCH` admissions are waiting, one
callback on the event loop turns the batch into JSON lines (each stamped with its
admission's own time), counts and times them in Prometheus, and writes the lines to
stdout with one flush. The lines are the ones structlog renders for every other event
(same fields, same order, same level filter; ``timestamp`` first, ``event`` and
``level`` last) but are encoded by orjson directly: this is the one high-volume log
line, and a structlog processor chain would cost more than the admission itself.
Batching keeps logging and metrics off the request path and runs them back to back
while their code and data are hot. ``/metrics`` and shutdown flush
first, so nothing recorded is lost or reported late.

Bounded whatever a review carries: at most :data:`MAX_BATCH` admissions wait; a line's
strings from the review (uid, kind, names, operation) are cut at :data:`MAX_FIELD`
characters, the reason at :data:`MAX_REASON`; the metrics' ``kind`` label is a handled
kind's name or ``other`` (a review may name any kind).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import sys
import time
from typing import BinaryIO

import orjson
import structlog
from prometheus_client import Counter, Histogram

from webhook import kinds
from webhook.runtime.logs import iso_utc
from webhook.runtime.metrics import ADMISSION_SECONDS, ADMISSIONS
from webhook.serve.answer import Outcome

FLUSH_SECONDS = 0.02
"""Longest time an admission waits in the journal before its line is written."""
MAX_BATCH = 512
"""Admissions that trigger a write at once (bounds memory and one flush's duration)."""
MAX_FIELD = 253
"""Longest string from a review written in a line (Kubernetes' longest object name);
a longer one is cut there and ends with ``...``."""
MAX_REASON = 1024
"""Longest reason written (carbonshift's own, but it may quote the review)."""
OTHER = "other"
"""The ``kind`` label of an admission of a kind carbonshift does not handle."""


@functools.cache
def admissions(kind: str, result: str) -> Counter:
    """Pre-bound ``carbonshift_admissions_total`` child (labels() costs more than inc())."""
    return ADMISSIONS.labels(kind, result)


@functools.cache
def admission_seconds(kind: str) -> Histogram:
    """Pre-bound ``carbonshift_admission_duration_seconds`` child."""
    return ADMISSION_SECONDS.labels(kind)


class AdmissionJournal:
    """Admission log lines and metrics, recorded now and written in batches."""

    def __init__(self, stream: BinaryIO | None = None) -> None:
        self._stream = stream if stream is not None else sys.stdout.buffer
        wrapper = structlog.get_config()["wrapper_class"]
        self._logging = bool(wrapper.is_enabled_for(None, logging.INFO))
        self._pending: list[tuple[Outcome, float, float]] = []
        self._timer: asyncio.TimerHandle | None = None

    def record(self, outcome: Outcome, seconds: float) -> None:
        """Note one answered admission (``seconds``: server time to answer it)."""
        pending = self._pending
        pending.append((outcome, seconds, time.time()))
        if len(pending) >= MAX_BATCH:
            self.flush()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(FLUSH_SECONDS, self.flush)

    def flush(self) -> None:
        """Write every recorded admission: metrics, then the log lines, one flush."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._pending = self._pending, []
        if not batch:
            return
        lines = []
        counts: dict[tuple[str, str], int] = {}
        handled = {row.kind for row in kinds.REGISTRY.rows}
        for outcome, seconds, at in batch:
            kind = outcome.kind if outcome.kind in handled else OTHER
            key = (kind, outcome.result)
            counts[key] = counts.get(key, 0) + 1
            admission_seconds(kind).observe(seconds)
            if self._logging:
                lines.append(_line(outcome, seconds, at))
        for (kind, result), count in counts.items():
            admissions(kind, result).inc(count)
        if lines:
            lines.append(b"")
            self._stream.write(b"\n".join(lines))
            self._stream.flush()

    def __len__(self) -> int:
        return len(self._pending)


def _clip(text: str, most: int = MAX_FIELD) -> str:
    return text if len(text) <= most else f"{text[: most - 3]}..."


def _line(outcome: Outcome, seconds: float, at: float) -> bytes:
    return orjson.dumps(
        {
            "timestamp": iso_utc(at),
            "uid": _clip(outcome.uid),
            "kind": _clip(outcome.kind),
            "namespace": _clip(outcome.namespace),
            "name": _clip(outcome.name),
            "operation": _clip(outcome.operation),
            "outcome": outcome.result,
            "reason": _clip(outcome.reason, MAX_REASON) or None,
            "warnings": len(outcome.warnings) or None,
            "duration_ms": round(seconds * 1000, 3),
            "event": "admission",
            "level": "info",
        }
    )
