"""Structured JSON logs on stdout (structlog + orjson), one line per event."""

from __future__ import annotations

import functools
import logging
import sys
import time
from collections.abc import MutableMapping
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
