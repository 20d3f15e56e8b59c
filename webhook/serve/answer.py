"""The AdmissionReview response: what one admission came to, and its bytes.

An :class:`Outcome` is what happened to one review (for the log line, the metrics and the
journal); :func:`respond` is the body sent back. The part after the uid is the same for
every review one decision answers, so a memo entry keeps it (:func:`tail`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import orjson

from webhook.decision.outcome import short


@dataclasses.dataclass(slots=True)
class Outcome:
    """What happened, for the log line and metrics."""

    uid: str
    kind: str = ""
    namespace: str = ""
    name: str = ""
    operation: str = ""
    result: str = "ignored"
    """patched | unchanged | skipped | ignored | failed_open | shed"""
    reason: str = ""
    warnings: Sequence[str] = ()
    patch: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    decision: str | None = None
    encoded_patch: str | None = None
    """``patch`` as the base64 JSON the response carries (None: no patch)."""
    tail: bytes | None = None
    """The response after the uid, when a memo entry already holds it."""


_HEAD = b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":'


def respond(outcome: Outcome) -> bytes:
    """The AdmissionReview response body for an outcome."""
    return _HEAD + orjson.dumps(outcome.uid) + (outcome.tail or tail(outcome))


def tail(outcome: Outcome) -> bytes:
    """The response after the uid: the same for every outcome of one decision."""
    response: dict[str, Any] = {"allowed": True}
    if outcome.encoded_patch is not None:
        response["patchType"] = "JSONPatch"
        response["patch"] = outcome.encoded_patch
    if outcome.warnings:
        response["warnings"] = list(dict.fromkeys(short(w) for w in outcome.warnings))
    return b"," + orjson.dumps(response)[1:] + b"}"
