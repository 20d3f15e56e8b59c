"""AdmissionReview in, AdmissionReview out: dispatch, opt-in rules, patch, fail-open.

HTTP-agnostic: the server hands over the raw body and gets back the status and body
to send. The envelope is decoded into typed structs (:class:`AdmissionReview`); a
malformed one raises :class:`~webhook.validation.InvalidInput` naming the field (HTTP
400). Errors while *deciding* never block the API server: the object is admitted
unchanged with a warning. Which kinds are handled, and how, is :mod:`webhook.kinds`.
"""

from __future__ import annotations

import base64
import dataclasses
from collections import OrderedDict
from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal

import msgspec
import orjson
import structlog

from webhook import kinds, validation
from webhook.decision.outcome import Change, short
from webhook.kinds import Context, Kind
from webhook.patch import build
from webhook.vocabulary import DECISION, ENABLED, REFRESH, ours

log = structlog.get_logger("carbonshift.admission")

API_VERSION: Final = "admission.k8s.io/v1"


class GroupVersionKind(msgspec.Struct, frozen=True, gc=False):
    """``request.kind``: what the object is."""

    group: str = ""
    version: str = ""
    kind: str = ""


Object = dict[str, Any]


class AdmissionRequest(msgspec.Struct, frozen=True, gc=False):
    """``request``: the fields carbonshift reads (others are accepted and ignored)."""

    uid: Annotated[str, msgspec.Meta(min_length=1)]
    kind: GroupVersionKind = GroupVersionKind()
    operation: str = ""
    namespace: str = ""
    name: str = ""
    object: Object | None = None
    oldObject: Object | None = None  # noqa: N815 - the API's field name
    dryRun: bool = False  # noqa: N815


class AdmissionReview(msgspec.Struct, frozen=True, gc=False):
    """An ``admission.k8s.io/v1`` AdmissionReview as kube-apiserver sends it."""

    request: AdmissionRequest
    apiVersion: Literal["admission.k8s.io/v1"] = API_VERSION  # noqa: N815
    kind: Literal["AdmissionReview"] = "AdmissionReview"


_decoder = validation.decoder(AdmissionReview)


@dataclasses.dataclass(slots=True)
class Outcome:
    """What happened, for the log line and metrics."""

    uid: str
    kind: str = ""
    namespace: str = ""
    name: str = ""
    operation: str = ""
    result: str = "ignored"
    """patched | unchanged | skipped | ignored | failed_open"""
    reason: str = ""
    warnings: list[str] = dataclasses.field(default_factory=list)
    patch: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    decision: str | None = None
    encoded_patch: str | None = None
    """``patch`` as the base64 JSON the response carries (None: no patch)."""


def parse(body: bytes) -> AdmissionRequest:
    """Decode and check the envelope; returns its ``request``."""
    return validation.decode(body, _decoder).request


def request_of(data: Mapping[str, Any]) -> AdmissionRequest:
    """A ``request`` built in Python (previews, tests), checked like a decoded one."""
    return validation.convert(data, AdmissionRequest, "request")


class DecisionMemo:
    """Recent decisions by their exact inputs, so identical reviews are answered once.

    GitOps controllers re-apply and server-side dry-run the same manifests over and
    over, and fleets stamp out many policies from one template. A decision depends only
    on the object's kind, its ``carbonshift.io/*`` labels and annotations (the
    vocabulary), whether it has annotations at all (the patch adds the map or a key to
    it), its spec, and the intensities in memory: those form the key. The object's name,
    uid and other annotations (``kubectl.kubernetes.io/last-applied-configuration``
    repeats the name) do not. Only CREATEs are kept: a recomputation on UPDATE also
    depends on how long the placement has been in force. Bounded LRU.
    """

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._entries: OrderedDict[tuple[bytes, int], _Memo] = OrderedDict()

    @staticmethod
    def key(request: AdmissionRequest, ctx: Context) -> tuple[bytes, int] | None:
        obj = request.object
        if ctx.generation is None or obj is None or request.operation != "CREATE":
            return None  # UPDATE decisions also depend on time (minimum dwell)
        meta = _metadata(obj)
        annotations = _strings(meta, "annotations")
        material = (
            request.kind.group,
            request.kind.kind,
            ours(_strings(meta, "labels")),
            "annotations" in meta,
            ours(annotations),
            obj.get("spec"),
        )
        try:
            encoded = orjson.dumps(material)
        except TypeError:
            return None
        return encoded, ctx.generation

    def get(self, key: tuple[bytes, int]) -> _Memo | None:
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
        return entry

    def put(self, key: tuple[bytes, int], outcome: Outcome) -> None:
        self._entries[key] = _Memo(
            outcome.result,
            outcome.reason,
            tuple(outcome.warnings),
            outcome.patch,
            outcome.decision,
            outcome.encoded_patch,
        )
        if len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


@dataclasses.dataclass(frozen=True, slots=True)
class _Memo:
    result: str
    reason: str
    warnings: tuple[str, ...]
    patch: list[dict[str, Any]]
    decision: str | None
    encoded_patch: str | None


def admit(request: AdmissionRequest, ctx: Context, memo: DecisionMemo | None = None) -> Outcome:
    """Decide on one parsed request. Never raises: internal errors fail open."""
    outcome = _describe(request)
    key = memo.key(request, ctx) if memo is not None else None
    if key is not None and memo is not None and (hit := memo.get(key)) is not None:
        outcome.result, outcome.reason, outcome.patch = hit.result, hit.reason, hit.patch
        outcome.warnings, outcome.decision = list(hit.warnings), hit.decision
        outcome.encoded_patch = hit.encoded_patch
        return outcome
    try:
        _decide(request, ctx, outcome)
    except Exception:
        log.exception("decision_failed", uid=outcome.uid, kind=outcome.kind)
        outcome.result, outcome.reason, outcome.patch = "failed_open", "internal error", []
        outcome.warnings = ["carbonshift: internal error; admitted unchanged"]
        return outcome
    if outcome.patch:
        outcome.encoded_patch = base64.b64encode(orjson.dumps(outcome.patch)).decode()
    if key is not None and memo is not None:
        memo.put(key, outcome)
    return outcome


def respond(outcome: Outcome) -> bytes:
    """The AdmissionReview response body for an outcome."""
    response: dict[str, Any] = {"uid": outcome.uid, "allowed": True}
    if outcome.encoded_patch is not None:
        response["patchType"] = "JSONPatch"
        response["patch"] = outcome.encoded_patch
    if outcome.warnings:
        response["warnings"] = list(dict.fromkeys(short(w) for w in outcome.warnings))
    return orjson.dumps(
        {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}
    )


def review(body: bytes, ctx: Context, memo: DecisionMemo | None = None) -> Outcome:
    """Parse, decide (raises :class:`~webhook.validation.InvalidInput` only for a bad
    envelope)."""
    return admit(parse(body), ctx, memo)


# --- internals ---------------------------------------------------------------------------


def _metadata(obj: Object | None) -> Mapping[str, Any]:
    meta = obj.get("metadata") if obj is not None else None
    return meta if isinstance(meta, dict) else {}


def _strings(meta: Mapping[str, Any], field: str) -> Mapping[str, str]:
    value = meta.get(field)
    return value if isinstance(value, dict) else {}


def _describe(request: AdmissionRequest) -> Outcome:
    meta = _metadata(request.object or request.oldObject)
    return Outcome(
        uid=request.uid,
        kind=request.kind.kind,
        namespace=request.namespace or str(meta.get("namespace") or ""),
        name=request.name or str(meta.get("name") or meta.get("generateName") or ""),
        operation=request.operation,
    )


def _skip_reason(request: AdmissionRequest, row: Kind, obj: Object, ctx: Context) -> str | None:
    enabled = _strings(_metadata(obj), "labels").get(ENABLED)
    if enabled == "false":
        return f"opted out ({ENABLED}=false)"
    if not row.namespaced and enabled != "true":
        return f"not opted in (cluster-scoped objects need label {ENABLED}=true)"
    operation = request.operation
    if operation == "CREATE":
        return None
    if operation == "UPDATE":
        if row.every_update(ctx.config):
            return None
        old = _strings(_metadata(request.oldObject), "annotations").get(REFRESH)
        if _strings(_metadata(obj), "annotations").get(REFRESH) != old:
            return None
        return f"UPDATE without a new {REFRESH} annotation"
    return f"operation {operation} is not mutated"


def _decide(request: AdmissionRequest, ctx: Context, outcome: Outcome) -> None:
    row = kinds.find(request.kind.group, request.kind.kind)
    obj = request.object
    if row is None or obj is None:
        outcome.result, outcome.reason = "ignored", "kind not handled"
        return
    reason = _skip_reason(request, row, obj, ctx)
    if reason:
        outcome.result, outcome.reason = "skipped", reason
        return
    decision = row.decide(obj, ctx)
    outcome.warnings = decision.warnings
    if decision.skipped:
        outcome.result, outcome.reason = "skipped", decision.skipped
        return
    changes = list(decision.changes)
    if changes and decision.record is not None:
        outcome.decision = decision.record.encode()
        changes.append(Change(("metadata", "annotations", DECISION), outcome.decision))
    outcome.patch = build(obj, changes)
    outcome.result = "patched" if outcome.patch else "unchanged"
