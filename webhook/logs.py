"""Structured JSON logs on stdout (structlog + orjson), one line per event."""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import orjson
import structlog


def configure(level: str = "info", *, json: bool = True, stream: TextIO = sys.stdout) -> None:
    """Set up structlog (and route stdlib loggers such as aiohttp's through it).

    Servers log JSON to stdout; CLI commands that print results log to stderr.
    """
    numeric = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if json:
        renderer: structlog.types.Processor = structlog.processors.JSONRenderer(
            serializer=orjson.dumps
        )
        factory: Any = structlog.BytesLoggerFactory(stream.buffer)
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=False)
        factory = structlog.PrintLoggerFactory(stream)
    structlog.configure(
        processors=[*shared, structlog.processors.dict_tracebacks, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=factory,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(stream)
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
