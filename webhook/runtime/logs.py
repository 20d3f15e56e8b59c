"""Structured JSON logs on stdout (structlog + orjson), one line per event."""

from __future__ import annotations

import functools
import logging
import sys
import time
from collections.abc import Hashable, MutableMapping
from typing import Any, TextIO

import orjson
import structlog


def configure(level: str = "info", *, stream: TextIO | None = None) -> None:
    """Set up structlog (and route stdlib loggers such as aiohttp's through it).

    Servers log JSON to stdout (``stream=None``: loggers are built once and cached, for
    speed); CLI commands pass ``sys.stderr``, looked up again at every log call.
    """
    numeric = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        add_timestamp,
    ]
    renderer: structlog.types.Processor = structlog.processors.JSONRenderer(serializer=orjson.dumps)
    factory: Any = structlog.BytesLoggerFactory(sys.stdout.buffer)
    if stream is not None:
        renderer = structlog.processors.JSONRenderer()
        factory = _CurrentStream(stream)
    structlog.configure(
        processors=[*shared, structlog.processors.dict_tracebacks, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=factory,
        cache_logger_on_first_use=stream is None,
    )
    handler = logging.StreamHandler(stream or sys.stdout)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.JSONRenderer(),
            ],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(max(numeric, logging.WARNING))


def add_timestamp(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> Any:
    """Set ``timestamp`` (ISO 8601, UTC, microseconds) to now, or to the epoch seconds
    already given there by a caller that logs an event after it happened."""
    at = event.get("timestamp")
    event["timestamp"] = iso_utc(at if isinstance(at, float) else time.time())
    return event


def iso_utc(at: float) -> str:
    """Epoch seconds as ``2026-11-22T08:00:00.123456Z``."""
    whole = int(at)
    return f"{_second(whole)}.{int((at - whole) * 1e6):06d}Z"


@functools.lru_cache(maxsize=4)
def _second(whole: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))


class _CurrentStream:
    """Logger factory that writes to whatever ``sys.stderr``/``sys.stdout`` is right now."""

    def __init__(self, stream: TextIO) -> None:
        self._name = "stderr" if stream is sys.stderr else "stdout"

    def __call__(self, *_args: Any) -> structlog.PrintLogger:
        return structlog.PrintLogger(getattr(sys, self._name))


REPEAT_SECONDS = 600.0
"""A warning about the same thing (a zone a provider fails for, an unreachable cache) is
written at most once in this many seconds; the next line says how many were held back."""


class Repeats:
    """Lets a repeated log line through once per key per ``seconds`` and counts the ones
    it held back, so a condition that comes back on every refresh writes one line per
    period, not one per occurrence. Holds at most ``size`` keys (the key let through
    longest ago is forgotten first): the keys are bounded, whatever callers name."""

    def __init__(self, seconds: float = REPEAT_SECONDS, size: int = 4096) -> None:
        self.seconds = seconds
        self.size = size
        self._seen: dict[Hashable, tuple[float, int]] = {}
        """Key -> when a line was last let through, and how many were held back since."""

    def let(self, key: Hashable, at: float) -> int | None:
        """None: hold this line back; else let it through, with the number of lines held
        back since the last one (0 at first). ``at``: seconds on any steady clock."""
        seen = self._seen.get(key)
        if seen is not None and at - seen[0] < self.seconds:
            self._seen[key] = (seen[0], seen[1] + 1)
            return None
        self._seen.pop(key, None)
        self._seen[key] = (at, 0)
        if len(self._seen) > self.size:
            del self._seen[next(iter(self._seen))]
        return seen[1] if seen is not None else 0

    def __len__(self) -> int:
        return len(self._seen)
