"""The AdmissionReview response: what one admission came to, and its bytes.

An :class:`Outcome` is what happened to one review (for the log line, the metrics and the
journal); :func:`respond` is the body sent back. The part after the uid is the same for
every review one decision answers, so a memo entry keeps it (:func:`tail`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Literal

import orjson

from webhook.decision.outcome import short

Result = Literal["patched", "unchanged", "skipped", "ignored", "failed_open", "shed"]
"""The legal results of an admission: a JSON patch, nothing to change, opted out or not
mutated (``skipped``), a kind carbonshift does not handle (``ignored``), an internal
error admitted unchanged (``failed_open``), an overload answered without deciding
(``shed``)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Verdict:
    """What deciding one admission came to (:func:`webhook.serve.admission.admit`)."""

    result: Result
    reason: str = ""
    warnings: Sequence[str] = ()
    patch: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    decision: str | None = None
    """The decision annotation the patch writes (None: none written)."""

    def settle(self, outcome: Outcome) -> None:
        """Record this verdict in the admission's outcome."""
        outcome.result, outcome.reason, outcome.warnings = self.result, self.reason, self.warnings
        outcome.patch, outcome.decision = self.patch, self.decision


FAILED_OPEN = Verdict(
    "failed_open", "internal error", ("carbonshift: internal error; admitted unchanged",)
)
"""An internal error: admitted unchanged, and the API server is told why."""


@dataclasses.dataclass(slots=True)
class Outcome:
    """What happened, for the log line and metrics."""

    uid: str
    kind: str = ""
    namespace: str = ""
    name: str = ""
    operation: str = ""
    result: str = "ignored"
    """A :data:`Result`; ``carbonshift mutate`` also shows re-evaluation steps' outcomes."""
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
