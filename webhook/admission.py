"""AdmissionReview in, AdmissionReview out: dispatch, opt-in rules, patch, fail-open.

HTTP-agnostic: the server hands over the raw body and gets back the status and body
to send. Errors in the *request* are :class:`BadReview` (HTTP 400); errors while
*deciding* never block the API server: the object is admitted unchanged with a warning.
"""

from __future__ import annotations

import base64
import dataclasses
from collections import OrderedDict
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

import orjson
import structlog

from webhook.config import Config
from webhook.decision import nodepool, placement
from webhook.decision.hysteresis import Hysteresis
from webhook.decision.outcome import Change, Decision, short
from webhook.intensity import IntensityTable
from webhook.patch import build
from webhook.vocabulary import DECISION, ENABLED, REFRESH

log = structlog.get_logger("carbonshift.admission")

API_VERSION = "admission.k8s.io/v1"

KARMADA = "policy.karmada.io"
KARPENTER = "karpenter.sh"
POLICY_KINDS = ("PropagationPolicy", "ClusterPropagationPolicy")
CLUSTER_SCOPED = ("ClusterPropagationPolicy", "NodePool")


class BadReview(ValueError):
    """The request body is not a usable AdmissionReview (answered with HTTP 400)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Context:
    """Inputs of one admission besides the review: config and in-memory intensities."""

    config: Config
    table: IntensityTable
    now: datetime
    generation: int | None = None
    """Identifies the table's content (:attr:`webhook.feed.Snapshot.generation`): equal
    generations mean equal tables. Decisions are memoised only when it is set."""


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


def parse(body: bytes) -> Mapping[str, Any]:
    """Decode and check the envelope; returns ``review["request"]``."""
    try:
        review = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadReview(f"body is not valid JSON: {exc}") from None
    if not isinstance(review, dict):
        raise BadReview("body must be a JSON object (an AdmissionReview)")
    if review.get("apiVersion", API_VERSION) != API_VERSION or review.get("kind") not in (
        None,
        "AdmissionReview",
    ):
        raise BadReview(f"expected kind AdmissionReview, apiVersion {API_VERSION}")
    request = review.get("request")
    if not isinstance(request, dict):
        raise BadReview("AdmissionReview has no request object")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise BadReview("request.uid is missing")
    for key in ("object", "oldObject"):
        if request.get(key) is not None and not isinstance(request[key], dict):
            raise BadReview(f"request.{key} must be an object")
    return request


class DecisionMemo:
    """Recent decisions by their exact inputs, so identical reviews are answered once.

    GitOps controllers re-apply and server-side dry-run the same manifests over and
    over, and fleets stamp out many policies from one template. A decision depends only
    on the object's kind, labels, annotations and spec and on the intensities in memory,
    so those form the key; the object's name and uid do not. Only CREATEs are kept:
    a recomputation on UPDATE also depends on how long the placement has been in force.
    Bounded LRU.
    """

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._entries: OrderedDict[tuple[bytes, int], _Memo] = OrderedDict()

    @staticmethod
    def key(request: Mapping[str, Any], ctx: Context) -> tuple[bytes, int] | None:
        obj = request.get("object")
        if ctx.generation is None or type(obj) is not dict or request.get("operation") != "CREATE":
            return None  # UPDATE decisions also depend on time (minimum dwell)
        raw_meta = obj.get("metadata")
        meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
        material = (
            request.get("kind"),
            meta.get("labels"),
            meta.get("annotations"),
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


def admit(request: Mapping[str, Any], ctx: Context, memo: DecisionMemo | None = None) -> Outcome:
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
    """Parse, decide (raises :class:`BadReview` only for a bad envelope)."""
    return admit(parse(body), ctx, memo)


# --- internals ---------------------------------------------------------------------------


def _describe(request: Mapping[str, Any]) -> Outcome:
    raw_kind = request.get("kind")
    kind: Mapping[str, Any] = raw_kind if isinstance(raw_kind, dict) else {}
    obj = request.get("object") or request.get("oldObject") or {}
    raw_meta = obj.get("metadata")
    meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
    return Outcome(
        uid=request["uid"],
        kind=str(kind.get("kind", "")),
        namespace=str(request.get("namespace") or meta.get("namespace") or ""),
        name=str(request.get("name") or meta.get("name") or meta.get("generateName") or ""),
        operation=str(request.get("operation", "")),
    )


_Decider = Callable[[Mapping[str, Any], Context], Decision]


def _policy(obj: Mapping[str, Any], ctx: Context) -> Decision:
    h = ctx.config.hysteresis
    inputs = placement.PolicyInputs(
        ctx.config.clusters,
        ctx.table,
        ctx.config.weighting,
        hysteresis=Hysteresis(margin=h.margin, dwell_hours=h.dwell_hours),
        now=ctx.now,
    )
    return placement.decide(obj, inputs)


def _nodepool(obj: Mapping[str, Any], ctx: Context) -> Decision:
    inputs = nodepool.NodePoolInputs(ctx.config.zone, ctx.table, ctx.config.nodepools)
    return nodepool.decide(obj, inputs)


def _decider(request: Mapping[str, Any]) -> _Decider | None:
    kind = request.get("kind")
    if not isinstance(kind, dict):
        return None
    group, name = kind.get("group"), kind.get("kind")
    if group == KARMADA and name in POLICY_KINDS:
        return _policy
    if group == KARPENTER and name == "NodePool":
        return _nodepool
    return None


def _annotations(obj: object) -> Mapping[str, str]:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    value = meta.get("annotations") if isinstance(meta, dict) else None
    return value if isinstance(value, dict) else {}


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    meta = obj.get("metadata")
    value = meta.get("labels") if isinstance(meta, dict) else None
    return value if isinstance(value, dict) else {}


def _skip_reason(request: Mapping[str, Any], obj: Mapping[str, Any], ctx: Context) -> str | None:
    enabled = _labels(obj).get(ENABLED)
    kind = request["kind"]["kind"]
    if enabled == "false":
        return f"opted out ({ENABLED}=false)"
    if kind in CLUSTER_SCOPED and enabled != "true":
        return f"not opted in (cluster-scoped objects need label {ENABLED}=true)"
    operation = request.get("operation")
    if operation == "CREATE":
        return None
    if operation == "UPDATE":
        if kind == "NodePool" and ctx.config.nodepools.mutate_on_update:
            return None
        old = request.get("oldObject")
        if _annotations(obj).get(REFRESH) != _annotations(old).get(REFRESH):
            return None
        return f"UPDATE without a new {REFRESH} annotation"
    return f"operation {operation} is not mutated"


def _decide(request: Mapping[str, Any], ctx: Context, outcome: Outcome) -> None:
    decider = _decider(request)
    obj = request.get("object")
    if decider is None or not isinstance(obj, dict):
        outcome.result, outcome.reason = "ignored", "kind not handled"
        return
    reason = _skip_reason(request, obj, ctx)
    if reason:
        outcome.result, outcome.reason = "skipped", reason
        return
    decision = decider(obj, ctx)
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
