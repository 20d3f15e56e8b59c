"""AdmissionReview in, AdmissionReview out: dispatch, opt-in rules, patch, fail-open.

HTTP-agnostic: the server hands over the raw body and gets back the status and body
to send. The envelope is decoded into typed structs (:mod:`webhook.serve.reviews`); a
malformed one raises :class:`~webhook.model.validation.InvalidInput` naming the field (HTTP
400). Errors while *deciding* never block the API server: the object is admitted
unchanged with a warning. Which kinds are handled, and how, is :mod:`webhook.kinds`.
"""

from __future__ import annotations

import base64

import orjson
import structlog

from webhook import kinds
from webhook.decision import reapply
from webhook.decision.optin import SELECTED, not_opted_in
from webhook.decision.outcome import Change, stored
from webhook.decision.patch import build
from webhook.decision.reapply import Settled
from webhook.kinds import Context, Kind
from webhook.model import validation
from webhook.model.objects import meta_of
from webhook.model.vocabulary import DECISION, REFRESH
from webhook.serve import reviews
from webhook.serve.answer import FAILED_OPEN, Outcome, Verdict, respond
from webhook.serve.memo import DecisionMemo, MemoKey, memo_key
from webhook.serve.reviews import AdmissionRequest, Head, Object

__all__ = ["DecisionMemo", "Outcome", "admit", "respond", "review", "unchanged"]

log = structlog.get_logger("carbonshift.admission")


def admit(request: AdmissionRequest, ctx: Context, memo: DecisionMemo | None = None) -> Outcome:
    """Decide on one parsed request. Never raises: internal errors fail open."""
    key = memo.key(request, ctx) if memo is not None else None
    if key is not None and memo is not None and (hit := memo.get(key)) is not None:
        return hit.answer(request, *_named(request))
    return _decided(request, ctx, _outcome(request, *_named(request)), memo, key)


def _decided(
    request: AdmissionRequest,
    ctx: Context,
    outcome: Outcome,
    memo: DecisionMemo | None,
    key: MemoKey | None,
) -> Outcome:
    try:
        verdict = _decide(request, ctx)
    except Exception:
        log.exception("decision_failed", uid=outcome.uid, kind=outcome.kind)
        verdict = FAILED_OPEN
    verdict.settle(outcome)
    if verdict is FAILED_OPEN:
        return outcome
    if outcome.patch:
        outcome.encoded_patch = base64.b64encode(orjson.dumps(outcome.patch)).decode()
    if key is not None and memo is not None:
        memo.put(key, outcome)
    return outcome


def unchanged(body: bytes, reason: str, warning: str) -> Outcome:
    """Answer a review without deciding: allowed, unchanged, ``warning`` (load shedding).

    Reads only the envelope's head (uid, kind, names); raises
    :class:`~webhook.model.validation.InvalidInput` for a bad envelope, as :func:`review` does."""
    head = validation.decode(body, reviews.HEAD).request
    kind, name, namespace = head.kind.kind, head.name, head.namespace
    return Outcome(head.uid, kind, namespace, name, head.operation, "shed", reason, (warning,))


def review(body: bytes, ctx: Context, memo: DecisionMemo | None = None) -> Outcome:
    """Decode a review and decide (raises :class:`~webhook.model.validation.InvalidInput` only
    for a bad envelope).

    A first pass reads only what the memo key needs (the object's metadata and its spec
    as raw JSON); a memo hit is answered from that. Only a miss decodes the whole review.
    """
    wire = validation.decode(body, reviews.WIRE).request
    key = None
    keyed, generation = wire.object, ctx.generation
    if (
        memo is not None
        and keyed is not None
        and generation is not None
        and wire.operation == "CREATE"
    ):
        meta = keyed.metadata
        spec = bytes(keyed.spec)
        key = memo_key(
            wire.kind, meta.labels, meta.annotations, spec, generation, fleet=ctx.fleet_generation
        )
        hit = memo.get(key)
        if hit is not None:
            name = wire.name or meta.name or meta.generateName
            return hit.answer(wire, name, wire.namespace or meta.namespace)
    request = reviews.parse(body)
    return _decided(request, ctx, _outcome(request, *_named(request)), memo, key)


# --- internals ---------------------------------------------------------------------------


def _named(request: AdmissionRequest) -> tuple[str, str]:
    """The object's name (or generateName) and namespace, for the log line."""
    meta = meta_of(request.object or request.oldObject)
    return request.name or meta.name or meta.generate_name, request.namespace or meta.namespace


def _outcome(request: Head, name: str, namespace: str) -> Outcome:
    return Outcome(
        uid=request.uid,
        kind=request.kind.kind,
        namespace=namespace,
        name=name,
        operation=request.operation,
    )


def _skip_reason(
    request: AdmissionRequest,
    row: Kind,
    obj: Object,
    ctx: Context,
    settled: Settled | None = None,
) -> str | None:
    # A namespaced object reaches the webhook only from a namespace the registration's
    # namespaceSelector matched: the one opt-in rule the leader and the preview apply too.
    reason = not_opted_in(obj, SELECTED if row.namespaced else None)
    if reason:
        return reason
    operation = request.operation
    if operation == "CREATE":
        return None
    if operation == "UPDATE":
        if row.every_update(ctx.config) or (settled is not None and settled.edited):
            return None
        old = meta_of(request.oldObject).annotations.get(REFRESH)
        if meta_of(obj).annotations.get(REFRESH) != old:
            return None
        kept = settled.reason if settled is not None else ""
        return kept or f"UPDATE without a new {REFRESH} annotation"
    return f"operation {operation} is not mutated"


def _decide(request: AdmissionRequest, ctx: Context) -> Verdict:
    row = kinds.find(request.kind.group, request.kind.kind)
    obj = request.object
    if row is None:
        return Verdict("ignored", "kind not handled")
    if obj is None:  # DELETE and CONNECT carry no object to mutate
        return Verdict("skipped", f"operation {request.operation} is not mutated")
    settled = _reapplied(request, row, obj)
    put_back = settled.changes if settled is not None else ()
    reason = _skip_reason(request, row, obj, ctx, settled)
    if reason:
        patch = build(obj, put_back)
        return Verdict("patched" if patch else "skipped", reason, (), patch)
    seen = settled.obj if settled is not None else obj
    decision = row.decide(seen, ctx)
    warnings = tuple(decision.warnings)
    if decision.skipped:
        patch = build(obj, put_back)
        return Verdict("patched" if patch else "skipped", decision.skipped, warnings, patch)
    written = stored(seen, decision, row.scope)
    changes, annotation = list(written.changes), written.annotation
    if request.operation == "UPDATE" and _only_record(changes, seen, annotation):
        # Only the data behind the record moved: the stored record stays, so an UPDATE
        # that changes no field is never a write of its own.
        changes, annotation = [], None
    patch = build(obj, [*put_back, *changes])
    return Verdict("patched" if patch else "unchanged", "", warnings, patch, annotation)


def _reapplied(request: AdmissionRequest, row: Kind, obj: Object) -> Settled | None:
    """An UPDATE of an object carbonshift manages, read against the stored one
    (:func:`webhook.decision.reapply.settle`); None for any other request."""
    if request.operation != "UPDATE" or row.following is None:
        return None
    return reapply.settle(request.oldObject, obj, row.following.fields)


def _only_record(changes: list[Change], obj: Object, annotation: str | None) -> bool:
    """Whether ``changes`` only rewrite the decision annotation with the same decision."""
    if any(c.path[:2] != ("metadata", "annotations") for c in changes):
        return False
    return reapply.same_record(meta_of(obj).annotations.get(DECISION), annotation)
