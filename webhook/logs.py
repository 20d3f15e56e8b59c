"""Structured JSON logs on stdout (structlog + orjson), one line per event."""

from __future__ import annotations

import logging
import sys
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
        structlog.processors.TimeStamper(fmt="iso", utc=True),
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


class _CurrentStream:
    """Logger factory that writes to whatever ``sys.stderr``/``sys.stdout`` is right now."""

    def __init__(self, stream: TextIO) -> None:
        self._name = "stderr" if stream is sys.stderr else "stdout"

    def __call__(self, *_args: Any) -> structlog.PrintLogger:
        return structlog.PrintLogger(getattr(sys, self._name))
